package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
	"github.com/etcdscope/etcdscope/pipeline"
	"github.com/etcdscope/etcdscope/render"
)

// TestCommitBadInput: every bad flag is one line and exit 2, before
// anything is attached or any etcd is asked.
func TestCommitBadInput(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	for _, args := range [][]string{
		{},
		{"--pid", "-3"},
		{"--pid", self, "--comm", "etcd"},
		{"--comm", "a-comm-longer-than-15"},
		{"--comm", "no-such-comm-x"},
		{"--pid", "999999999"},
		{"--pid", self, "--duration", "-1s"},
		{"--pid", self, "--output", "xml"},
		{"--pid", self, "--cert", "c.pem"},
		{"--pid", self, "--cacert", "ca.pem"},
		{"--pid", self, "--load", "20/s"},
		{"--pid", self, "--load", "fast", "--etcd-endpoints", "http://127.0.0.1:2379"},
		{"--pid", self, "--load", "5000/s", "--etcd-endpoints", "http://127.0.0.1:2379"},
		{"--pid", self, "--load", "20/s", "--duration", "0", "--etcd-endpoints", "http://127.0.0.1:2379"},
		{"--pid", self, "--etcd-endpoints", "127.0.0.1:2379"},
		{"--pid", self, "--etcd-endpoints", "http://127.0.0.1:2379", "--cacert", "/nonexistent/ca.pem"},
		{"--pid", self, "--ready-file", "/nonexistent/dir/ready"},
		{"--pid", self, "extra"},
	} {
		if rc := run(append([]string{"commit"}, args...)); rc != 2 {
			t.Errorf("commit %v: exit %d, want 2", args, rc)
		}
	}
	for _, s := range []string{"0", "20", "20/s", "0.5/s"} {
		if _, err := parseRate(s); err != nil {
			t.Errorf("--load %s: %v", s, err)
		}
	}
}

// TestCommitTableModelOnly: an etcd whose functions cannot be probed
// (here v3.4 on arm64, where no RET is found) falls back to the model; the table
// then prints what the model knows and one line on why no write is split,
// not "server-side write p50 0.000 ms ... over 0 paired puts" and "no write
// was traced", zeros that read as measured.
func TestCommitTableModelOnly(t *testing.T) {
	res := commitCase(t, "model") // its pid is 4444
	var b strings.Builder
	render.CommitTable(&b, commitRun(res, 4242))
	out := b.String()
	t.Logf("%s", out)
	for _, want := range []string{"source: model", "no write is split: etcd 3.4.23, pid 4242: etcd v3.4", "model (kernel-free", "wal_append", "load: 20 puts"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"writes traced", "server-side write", "paired puts", "verdict:", "no write was traced", "0.000 ms"} {
		if strings.Contains(out, not) {
			t.Errorf("output has %q:\n%s", not, out)
		}
	}
	if n := strings.Count(out, "no write is split"); n != 1 {
		t.Errorf("%d lines on why no write is split", n)
	}
	if s := render.CommitSummary(commitRun(res, 4242)); len(s.Verdicts) != 0 {
		t.Errorf("JSON summary verdicts %q for the model alone", s.Verdicts)
	}
}

// TestCommitHeaderWithoutEndpoints: without --etcd-endpoints the member
// and the cluster size are unknown, and the header says so; it printed
// "member local WAL, role unknown (give --etcd-endpoints) of 0" (a fresh
// user's run).
func TestCommitHeaderWithoutEndpoints(t *testing.T) {
	res := &pipeline.CommitResult{Source: commit.SourceUprobes, Report: commit.NewReport()}
	var b strings.Builder
	render.CommitTable(&b, commitRun(res, 3010))
	head, _, _ := strings.Cut(b.String(), "\n")
	if want := "etcdscope commit: pid 3010, member unknown, role unknown (give --etcd-endpoints); source: "; !strings.HasPrefix(head, want) {
		t.Errorf("header %q, want it to start %q", head, want)
	}
}

// TestCommitTableEscapesMemberNames: a member name is whatever the member
// was started with (etcd --name), read from the member list: it reaches
// root's terminal only escaped, in the table and in JSON.
func TestCommitTableEscapesMemberNames(t *testing.T) {
	const name = "m1\x1b]0;owned\x07\x1b[2J\r\u009b1m"
	res := &pipeline.CommitResult{Source: commit.SourceUprobes, Report: commit.NewReport(), Role: commit.RoleLeader,
		LocalID: 0x28d1, LeaderID: 0x28d1, Cluster: commit.ClusterState{Voters: 1, Names: commit.Names{0x28d1: name}}}
	var b strings.Builder
	if err := render.CommitTable(&b, commitRun(res, 7)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07\r\u009b") {
		t.Errorf("raw control characters in the table:\n%q", out)
	}
	if !strings.Contains(out, render.Escape(name)) {
		t.Errorf("the table lacks the escaped name %q:\n%s", render.Escape(name), out)
	}
	var j strings.Builder
	if err := json.NewEncoder(render.JSONText(&j)).Encode(map[string]string{"decider_name": name}); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(j.String(), "\x1b\x07\r\u009b") {
		t.Errorf("raw control characters in JSON: %q", j.String())
	}
}

// TestCommitPIDNotTheEndpoints: --pid and --etcd-endpoints that do not
// name one member, against a real cluster, are bad input (exit 2, one
// line): a process that is no etcd is refused for its binary, before any
// etcd is asked; a real etcd's pid with another member's client URL is
// refused naming the member the pid is and the URL to give (from the
// member list).
func TestCommitPIDNotTheEndpoints(t *testing.T) {
	testenv.RequireRoot(t)
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, IPs: []string{"127.0.5.1", "127.0.5.2", "127.0.5.3"}})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m1, m2 := c.Members[0], c.Members[1]
	for _, tc := range []struct {
		pid  int
		want string
	}{
		// This test process: a Go program without etcd's write function.
		{os.Getpid(), fmt.Sprintf("not an etcd this etcdscope can probe, and it serves none of --etcd-endpoints %s; give etcd's pid (pgrep -x etcd)", m1.ClientURL)},
		{m2.PID, fmt.Sprintf("pid %d is member %s, at %s: give --etcd-endpoints %s, or the pid of the member at %s", m2.PID, m2.Name, m2.ClientURL, m2.ClientURL, m1.ClientURL)},
	} {
		cmd := exec.Command(self, "commit", "--pid", strconv.Itoa(tc.pid), "--etcd-endpoints", m1.ClientURL, "--duration", "1s")
		cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Run()
		t.Logf("pid %d: stderr: %s", tc.pid, stderr.String())
		if rc := cmd.ProcessState.ExitCode(); rc != 2 {
			t.Errorf("pid %d: exit %d, want 2; stderr:\n%s", tc.pid, rc, stderr.String())
			continue
		}
		lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
			t.Errorf("pid %d: stderr is %d line(s), want one containing %q:\n%s", tc.pid, len(lines), tc.want, stderr.String())
		}
		if stdout.Len() != 0 {
			t.Errorf("pid %d: stdout not empty:\n%s", tc.pid, stdout.String())
		}
	}
}
