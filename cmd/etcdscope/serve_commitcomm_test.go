package main

import (
	"testing"
)

// TestServeCommitCommNoneYet: serve --commit-comm of a comm no process
// has yet is not bad input (a DaemonSet's agent starts before etcd's
// static pod after a node's boot): validation leaves CommitPID 0, for
// serve to wait for the first process of that comm (nextCommit), as it
// waits for the next one after a restart.
func TestServeCommitCommNoneYet(t *testing.T) {
	var f serveFlags
	fs := f.flagSet()
	if err := fs.Parse([]string{"--listen", "127.0.0.1:0", "--commit-comm", "no-such-comm-x"}); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := f.validate()
	if err != nil {
		t.Fatalf("serve --commit-comm no-such-comm-x: %v; want it accepted (serve waits for the process)", err)
	}
	if cfg.CommitPID != 0 || cfg.CommitComm != "no-such-comm-x" {
		t.Errorf("CommitPID %d, CommitComm %q; want 0 (none yet) and the comm", cfg.CommitPID, cfg.CommitComm)
	}
}
