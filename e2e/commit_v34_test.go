package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// debianEtcd is etcd v3.4 as Debian ships it (the etcd-server package:
// 3.4.23, built with Go 1.19, stripped): the etcd most hosts that install
// etcd from a distribution run. scripts/deps.sh extracts its binary into
// bin/etcd34 rather than installing the package, which would start an
// etcd service (holding :2379 and :2380, a process named etcd) on a host
// with systemd.
func debianEtcd(t *testing.T) string { return filepath.Join(testenv.RepoRoot(t), "bin", "etcd34") }

// TestCommitEtcd34: `commit --pid` on Debian's etcd v3.4, whose functions
// are not the v3.5/v3.6 ones the probes need, falls back to the model from
// etcd's metrics and says so in one line naming the version; it prints
// only what it knows. Before, it printed "server-side write p50 0.000 ms
// ... over 0 paired puts", "apply 0.000 ms from " and "verdict: no write
// was traced" while its own load made 159 puts. The oracles: the version
// the binary reports (etcd --version), and the leader's commit index
// (etcd_server_proposals_committed_total), which moves by at least the
// puts the table says the load made.
func TestCommitEtcd34(t *testing.T) {
	testenv.RequireRoot(t)
	debianEtcd := debianEtcd(t)
	if _, err := os.Stat(debianEtcd); err != nil {
		testenv.Missing(t, "no "+debianEtcd+" (scripts/deps.sh extracts it from Debian's etcd-server: etcd v3.4)")
	}
	out, err := exec.Command(debianEtcd, "--version").Output()
	m := regexp.MustCompile(`etcd Version: (3\.4\.\d+)`).FindSubmatch(out)
	if err != nil || m == nil {
		testenv.Missing(t, debianEtcd+" is not etcd v3.4 (scripts/deps.sh extracts it from Debian's etcd-server): "+strings.TrimSpace(string(out)))
	}
	version := string(m[1])
	t.Setenv("ETCDSCOPE_ETCD", debianEtcd)
	c := etcdtest.Start(t, etcdtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leader := c.Members[0]
	before := restingCommitIndex(ctx, t, c, leader)
	cmd := exec.CommandContext(ctx, etcdscope(t), "commit", "--pid", strconv.Itoa(leader.PID), "--etcd-endpoints", leader.ClientURL,
		"--duration", "6s", "--load", "20/s")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("etcdscope commit: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	time.Sleep(300 * time.Millisecond)
	after, err := c.Scrape(ctx, leader)
	if err != nil {
		t.Fatal(err)
	}
	table := stdout.String()
	t.Logf("etcd %s:\n%s\nstderr:\n%s", version, table, stderr.String())

	var why []string
	for _, l := range strings.Split(table, "\n") {
		if strings.HasPrefix(l, "no write is split: ") {
			why = append(why, l)
		}
	}
	if want := "no write is split: etcd " + version + ", pid " + strconv.Itoa(leader.PID) + ": etcd v3.4"; len(why) != 1 || !strings.HasPrefix(why[0], want) {
		t.Errorf("lines on why no write is split: %q, want one starting %q", why, want)
	}
	for _, not := range []string{"0.000 ms", "writes traced", "server-side write", "paired puts", "verdict:", "no write was traced", "map["} {
		if strings.Contains(table, not) {
			t.Errorf("the table has %q", not)
		}
	}
	for _, want := range []string{"source: model", "model (kernel-free", "wal_append", "etcd_disk_wal_fsync_duration_seconds"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q", want)
		}
	}
	pm := regexp.MustCompile(`load: (\d+) puts \(0 errors\)`).FindStringSubmatch(table)
	if pm == nil {
		t.Fatal("no load line with 0 errors")
	}
	puts, _ := strconv.Atoi(pm[1])
	committed := gauge(after, "etcd_server_proposals_committed_total") - gauge(before, "etcd_server_proposals_committed_total")
	t.Logf("load: %d puts; the leader's commit index moved by %.0f", puts, committed)
	// 20/s for 6 s; the lease grant and revoke are entries too.
	if puts < 60 || committed < float64(puts) {
		t.Errorf("%d puts, commit index delta %.0f: want at least 60 puts (20/s for 6 s) and a delta of at least the puts", puts, committed)
	}
}
