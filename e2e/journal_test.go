package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestJournalKnown: the table says whether an ext4 holds a jbd2 journal
// where the live run could read it, rather than both possibilities (a
// fresh user's run on this machine's journal-less root printed the WAL's
// "with a journal ... usually do" note beside "an ext4 without a
// journal"). Two ext4s on loop devices, one made with -O ^has_journal;
// the oracle is the kernel's own list of mounted journals, /proc/fs/jbd2
// (NAME-8 for ext4's internal journal, inode 8), read here, and mkfs's
// option. Each run's JSON summary says jbd2 as the kernel does for its
// device; the journal-less one's table says "no jbd2 journal on loopN"
// and neither preallocation nor "without a journal" note, live and in
// the replay of its capture (the end line carries what the run knew).
func TestJournalKnown(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		mkfs    []string
		journal bool
	}{
		{"no-journal", []string{"-q", "-F", "-O", "^has_journal"}, false},
		{"journal", []string{"-q", "-F"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := loopDevice(t, dir, 256<<20)
			mnt := mountFS(t, dev, "ext4", tc.mkfs...)
			name := filepath.Base(dev)
			entries, err := os.ReadDir("/proc/fs/jbd2")
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			inKernel := false
			for _, e := range entries {
				inKernel = inKernel || e.Name() == name+"-8"
			}
			if inKernel != tc.journal {
				t.Fatalf("/proc/fs/jbd2 lists %s-8: %v; mkfs %v", name, inKernel, tc.mkfs)
			}
			out, err := exec.Command(etcdscope(t), "fsync", "--workload", "wal", "--dir", mnt, "--duration", "2s", "--output", "json", "--interval", "0").Output()
			if err != nil {
				t.Fatalf("etcdscope: %v", err)
			}
			_, rep := parseOutput(t, out)
			var devKey string
			for _, g := range rep.Groups {
				if g.Key.DevName == name && g.Key.FS == "ext4" {
					devKey = g.Key.Dev
				}
			}
			has, known := rep.JBD2(devKey)
			if devKey == "" || !known || has != inKernel {
				t.Fatalf("summary journals %+v for %s (%s): known %v, jbd2 %v; the kernel lists it: %v", rep.Journals, name, devKey, known, has, inKernel)
			}
			capture := filepath.Join(t.TempDir(), "run.capture")
			live, err := exec.Command(etcdscope(t), "fsync", "--workload", "wal", "--dir", mnt, "--duration", "1s", "--interval", "0", "--capture", capture).Output()
			if err != nil {
				t.Fatalf("etcdscope: %v", err)
			}
			// The capture's replay says what the live run knew.
			replay, err := exec.Command(etcdscope(t), "report", capture).Output()
			if err != nil {
				t.Fatalf("etcdscope report: %v", err)
			}
			for _, s := range []string{string(live), string(replay)} {
				checkJournalNotes(t, s, name, tc.journal)
			}
		})
	}
}

// checkJournalNotes checks a table's jbd2 notes for device name, which
// holds a journal or not.
func checkJournalNotes(t *testing.T, s, name string, journal bool) {
	t.Helper()
	if strings.Contains(s, "an ext4 without a journal has no jbd2 commits") {
		t.Errorf("the table says both possibilities where the run knew:\n%s", s)
	}
	if noJournal := "note: no jbd2 journal on " + name; strings.Contains(s, noJournal) == journal {
		t.Errorf("%q shown %v with a journal %v:\n%s", noJournal, !journal, journal, s)
	}
	if !journal && strings.Contains(s, "with a journal etcd's WAL calls usually do") {
		t.Errorf("the journal-less table gives the preallocation reason:\n%s", s)
	}
}
