package main

import (
	"os"
	"strconv"
	"testing"
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
