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

	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// debianEtcd is etcd v3.4 as Debian ships it (the etcd-server package:
// 3.4.23, built with Go 1.19, cgo, stripped): the etcd most hosts that
// install etcd from a distribution run. scripts/deps.sh extracts its
// binary into bin/etcd34 rather than installing the package, which would
// start an etcd service (holding :2379 and :2380, a process named etcd)
// on a host with systemd.
func debianEtcd(t *testing.T) string { return filepath.Join(testenv.RepoRoot(t), "bin", "etcd34") }

// TestCommitEtcd34: `commit --pid` on Debian's etcd v3.4 splits every
// write as on v3.5/v3.6 (its functions under go.etcd.io/etcd's package
// paths, its 72-byte raftpb.Entry, its Save's entries on the stack:
// tracer.etcdBuilds). Until 2026-12-06 it refused v3.4 and showed etcd's
// metrics only. The oracles: the version the binary reports (etcd
// --version); the leader's commit index (etcd_server_proposals_committed_total),
// whose delta over the run is every write traced (the load's puts and
// its lease's grant and revoke; the put the window's end cancels may
// commit too, not followed), so the writes split for the puts are those
// less the lease's two; etcd's own count of WAL fdatasyncs; and each
// write's parts, which sum exactly to its server-side time.
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
		"--duration", "10s", "--load", "20/s", "--output", "json")
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
	recs, sum, err := commit.ReadRecords(bytes.NewReader(stdout.Bytes()))
	if err != nil || sum == nil {
		t.Fatalf("reading the output: %v (summary %v)\n%s", err, sum, stderr.String())
	}
	t.Logf("etcd %s; stderr:\n%s", version, stderr.String())
	if sum.Source != commit.SourceUprobes || len(sum.Unavailable) > 0 || sum.EtcdVersion != version {
		t.Fatalf("source %s, unavailable %v, etcd version %q: want uprobes, every layer, %s", sum.Source, sum.Unavailable, sum.EtcdVersion, version)
	}
	if sum.LostEvents != 0 || sum.Missed != 0 {
		t.Errorf("lost %d events, missed %d", sum.LostEvents, sum.Missed)
	}
	if sum.ClientPutNs == nil || sum.ClientOutsideNs == nil {
		t.Fatal("no client-side times in the summary: the load made no put")
	}
	puts := int(sum.ClientPutNs.Count)
	committed := int(gauge(after, "etcd_server_proposals_committed_total") - gauge(before, "etcd_server_proposals_committed_total"))
	// 20/s for 10 s; the lease's grant and revoke are writes too.
	t.Logf("%d writes split (%d not followed), %d puts; the leader's commit index moved by %d (the puts and the lease's grant and revoke); %d paired with a put",
		len(recs), sum.Dropped, puts, committed, sum.ClientOutsideNs.Count)
	// A put in flight when the window ends is cancelled by the client (not
	// counted as a put) but may still commit; its write then returns
	// unapplied: not followed. So: every write split or (that one) not
	// followed, and the writes split are the puts and the lease's two.
	if puts < 150 || len(recs)+sum.Dropped != committed || sum.Dropped > 1 || len(recs)-2 != puts {
		t.Errorf("%d writes split (%d not followed), %d puts, commit index delta %d: want ≥ 150 puts, split + not followed = the delta, at most the last put not followed, and split = the puts + the lease's grant and revoke",
			len(recs), sum.Dropped, puts, committed)
	}
	if sum.ClientOutsideNs.Count != int64(puts) {
		t.Errorf("%d of %d puts paired with their write", sum.ClientOutsideNs.Count, puts)
	}
	const walFsync = "etcd_disk_wal_fsync_duration_seconds"
	if fsyncs := etcdtest.SumCounter(after, walFsync) - etcdtest.SumCounter(before, walFsync); sum.WALSyncsNs == nil || float64(sum.WALSyncsNs.Count) != fsyncs {
		t.Errorf("traced %v WAL syncs, etcd counted %.0f fdatasyncs", sum.WALSyncsNs, fsyncs)
	}
	for _, r := range recs {
		var s int64
		for _, v := range r.PartsNs {
			s += v
		}
		if s != r.TotalNs || len(r.Missing) > 0 || r.Role != commit.RoleLeader || r.TotalNs <= 0 {
			t.Fatalf("write %d: parts %v sum to %d, total %d, missing %v, role %q", r.ID, r.PartsNs, s, r.TotalNs, r.Missing, r.Role)
		}
		if e := r.Entry; e == nil || e.Index != r.Index || e.Term == 0 || int64(e.SaveEndNs-e.SaveStartNs) != r.PartsNs[commit.PartWALAppend] {
			t.Fatalf("write %d (index %d, wal_append %d ns): entry %+v", r.ID, r.Index, r.PartsNs[commit.PartWALAppend], e)
		}
	}
	if len(sum.Verdicts) == 0 {
		t.Error("no verdict")
	}
}
