package diagnose

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCutOffField: logs of a member cut off from its peers, from public
// reports (testdata/README.md), which were refused as "not an etcd log"
// when they held no disk or heartbeat line: its election rounds
// ("became (pre-)candidate"), whether a leader follows, and each peer it
// could not reach with the error logged, counted by hand.
func TestCutOffField(t *testing.T) {
	cases := []struct {
		file        string
		campaigns   int
		preVote     bool
		first, last int
		peers       string // peer:lines, comma-joined
		firstErr    string
		sev         Severity
	}{
		{"cloudstack-7537-zap-prevote.log", 1, true, 11, 11, "f560bc2b67e4cfa4:1", "dial tcp 10.1.1.183:2380: i/o timeout", Bad},
		{"apisix-11674-zap-prevote.log", 1, true, 63, 63, "", "", Bad},
		{"skuba-1327-candidate.log", 3, false, 773, 775, "69736148f60bba7e:1", "dial tcp 10.164.95.139:2380: connect: connection refused", Bad},
		{"etcd-10721-syslog-candidate.log", 2, false, 239, 240, "d3a39059afc42461:2", "dial tcp 172.16.137.102:2380: i/o timeout", Bad},
		// no campaign of its own in the excerpt: two peers unreachable
		// (one "is unhealthy" line and two stream dials each).
		{"etcd-3639-etcd2-dial-timeout.log", 0, false, 0, 0, "255894dccb1821a7:3,420c9b9a89d8b23d:3", "dial tcp 192.168.33.12:2380: i/o timeout", Warn},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			f := onlyFinding(t, readField(t, c.file, KindLog), "cut_off")
			v := f.CutOff
			var peers []string
			firstErr := ""
			for _, p := range v.Peers {
				peers = append(peers, fmt.Sprintf("%s:%d", p.Peer, p.Lines))
				if firstErr == "" && len(p.Errors) > 0 {
					firstErr = p.Errors[0]
				}
			}
			if v.Campaigns != c.campaigns || v.PreVote != c.preVote || v.FirstTerm != c.first || v.LastTerm != c.last ||
				strings.Join(peers, ",") != c.peers || firstErr != c.firstErr || v.LeaderAfter || v.SlowFsyncs != 0 || f.Severity != c.sev {
				t.Errorf("got %+v, %s; want %+v", v, f.Severity, c)
			}
		})
	}
	// Constructed: rounds that end with a leader are a warning, not a
	// member cut off.
	in := Input{Name: "constructed", Data: []byte(`{"level":"info","ts":"2024-01-01T00:00:00Z","msg":"a became pre-candidate at term 5"}
{"level":"info","ts":"2024-01-01T00:00:01Z","msg":"raft.node: a elected leader b at term 6"}
`)}
	rep, err := Diagnose([]Input{in}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f := onlyFinding(t, rep, "cut_off"); f.Severity != Warn || !f.CutOff.LeaderAfter {
		t.Errorf("%+v", f)
	}
}

// TestStartLogs: etcd v3.6.16's own logs of a normal start (testdata
// README, "made here"): the bootstrap election (pre-vote at term 1, a
// leader at term 2), a one-member cluster's rounds and a member's first
// leader after its start line are no cut-off and no leader change; one
// term's "became leader" and "elected leader" lines are one change. The
// same cluster's leader losing its peers when they stop is both.
func TestStartLogs(t *testing.T) {
	cases := []struct {
		file      string
		cutOff    Severity // "" when no cut_off finding
		leader    Severity
		lines     int
		first     int
		bootstrap bool
		changes   int
	}{
		{"start/etcd3616-one-member.log", "", OK, 2, 2, true, 0},
		{"start/etcd3616-one-member-restart.log", "", OK, 2, 3, false, 0},
		{"start/etcd3616-three-m1-start.log", "", OK, 1, 2, true, 0},
		{"start/etcd3616-three-m3-start.log", "", OK, 2, 2, true, 0},
		{"start/etcd3616-staggered-s1.log", "", OK, 2, 2, true, 0},
		{"start/etcd3616-staggered-s2.log", "", OK, 1, 2, true, 0},
		{"start/etcd3616-three-m3-stop.log", Bad, Warn, 3, 2, true, 1},
		{"start/etcd3616-one-member-slow-disk.log", "", OK, 2, 2, true, 0},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			rep := readField(t, c.file, KindLog)
			var cut, lead *Finding
			for i, f := range rep.Findings {
				switch f.Topic {
				case TopicCutOff:
					cut = &rep.Findings[i]
				case TopicLeader:
					lead = &rep.Findings[i]
				}
			}
			if (cut == nil) != (c.cutOff == "") || cut != nil && cut.Severity != c.cutOff {
				t.Errorf("cut_off: %+v, want %q", cut, c.cutOff)
			}
			if lead == nil {
				t.Fatal("no leader finding")
			}
			v := lead.Leader
			if lead.Severity != c.leader || v.Count != c.lines || v.Terms != 1 || v.First != c.first || v.Bootstrap != c.bootstrap || v.Changes != c.changes {
				t.Errorf("leader: %s %+v, want %+v", lead.Severity, v, c)
			}
		})
	}
	// A start on a slow disk: six slow fdatasyncs, two of them within
	// 20 s before the bootstrap leader, which is no change.
	rep := readField(t, "start/etcd3616-one-member-slow-disk.log", KindLog)
	if v := onlyFinding(t, rep, "slow_fdatasync").SlowFsync; v.Count != 6 || !v.Leaders || v.Followed != 0 {
		t.Errorf("slow_fdatasync: %+v, want 6 syncs, leader lines and 0 followed by a change", v)
	}
	// The stop: pre-vote at term 1 and candidate at term 2 are one
	// round, then two pre-vote rounds at term 2 with no leader after.
	rep = readField(t, "start/etcd3616-three-m3-stop.log", KindLog)
	if v := onlyFinding(t, rep, "cut_off").CutOff; v.Campaigns != 3 || len(v.Peers) != 2 || v.OneMember || v.LeaderAfter {
		t.Errorf("stop: %+v", v)
	}
}

// TestPeerSpan: two real scrapes of an etcd v3.6.16 member 11.069 s
// apart (testdata/start/README.md), each peer's RTT series 2
// observations apart (one per prober). With the fetch times, as a polled
// URL has them, the span is the wall time between them; as files with
// no time, one observation per prober says only "under a minute" (it
// said "about 1m0s", rounding 30 s up).
func TestPeerSpan(t *testing.T) {
	in := readInputs(t, "start/etcd3616-three-r1-scrape-1.prom", "start/etcd3616-three-r1-scrape-2.prom")
	for _, timed := range []bool{false, true} {
		if timed {
			in[0].At = time.Date(2026, 12, 7, 6, 2, 14, 783932699, time.UTC)
			in[1].At = time.Date(2026, 12, 7, 6, 2, 25, 853426009, time.UTC)
		}
		fs := peerRTTFindings(t, in)
		for _, f := range fs {
			v := f.Peer
			want := PeerFacts{Probers: 2, Span: time.Minute, SpanUnder: true}
			if timed {
				want = PeerFacts{Probers: 2, Span: 11069493310 * time.Nanosecond, SpanMeasured: true}
			}
			if v.Stats.Observations != 2 || v.Probers != want.Probers || v.Span != want.Span || v.SpanMeasured != want.SpanMeasured || v.SpanUnder != want.SpanUnder {
				t.Errorf("timed %v, %s: %.0f observations, %v probers, span %s measured %v under %v", timed, f.Subject, v.Stats.Observations, v.Probers, v.Span, v.SpanMeasured, v.SpanUnder)
			}
		}
		if len(fs) != 2 {
			t.Errorf("timed %v: %d peer findings, want 2", timed, len(fs))
		}
	}
}

// TestPeerNoObservationsUnknown: two scrapes with no peer RTT observation
// between them (the same real scrape read twice, 10 s apart) judge
// nothing about the RTT: each peer_rtt finding is unknown, not OK (a new
// user's walk read "[OK] peer_rtt ... RTT metric: no observations").
func TestPeerNoObservationsUnknown(t *testing.T) {
	in := readInputs(t, "start/etcd3616-three-r1-scrape-1.prom", "start/etcd3616-three-r1-scrape-1.prom")
	in[0].At = time.Date(2026, 12, 7, 6, 2, 14, 0, time.UTC)
	in[1].At = in[0].At.Add(10 * time.Second)
	fs := peerRTTFindings(t, in)
	for _, f := range fs {
		if f.Peer.Modes.Reason != ModesNoObservations || f.Severity != Unknown {
			t.Errorf("%s: %s, modes %+v; want unknown with no observations", f.Subject, f.Severity, f.Peer.Modes)
		}
	}
	if len(fs) == 0 {
		t.Fatal("no peer_rtt finding")
	}
}

// peerRTTFindings diagnoses in and returns its peer_rtt findings.
func peerRTTFindings(t *testing.T, in []Input) []Finding {
	t.Helper()
	rep, err := Diagnose(in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out []Finding
	for _, f := range rep.Findings {
		if f.Topic == TopicPeerRTT {
			out = append(out, f)
		}
	}
	return out
}
