package diagnose

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
)

// Scrape is what one member's /metrics text (or its part of a federated
// text) holds of the histograms the diagnosis reads.
type Scrape struct {
	Source string `json:"source"`
	// Member: the instance (or pod) label when the text has one, else the
	// input's name.
	Member string `json:"member"`
	// ByLabel: Member came from a label, so scrapes with the same one are
	// the same member.
	ByLabel      bool      `json:"-"`
	At           time.Time `json:"at,omitzero"`
	ProcessStart time.Time `json:"process_start,omitzero"`
	// ServerID: etcd_server_id's server_id label (etcd 3.5+), "" if absent.
	ServerID string `json:"server_id,omitempty"`
	// Leader: etcd_server_is_leader, -1 when absent.
	Leader  int                 `json:"is_leader"`
	WAL     *etcdmetric.Series  `json:"wal_fsync,omitempty"`
	Backend *etcdmetric.Series  `json:"backend_commit,omitempty"`
	Peers   []etcdmetric.Series `json:"peer_rtt,omitempty"`
	// WALName: the name the WAL histogram had (pre-3.0 builds:
	// etcd_wal_fsync_durations_seconds).
	WALName string             `json:"wal_name,omitempty"`
	Cleaned etcdmetric.Cleaned `json:"cleaned"`
}

// ReadMetrics reads one /metrics text into one Scrape per member: one for
// a member's own page, several for a federated text whose samples carry
// instance labels.
func ReadMetrics(in Input) ([]Scrape, error) {
	fams, cleaned, err := etcdmetric.ParseText(bytes.NewReader(in.Data))
	if err != nil {
		return nil, err
	}
	byMember := map[string]*Scrape{}
	var order []string
	get := func(labels map[string]string) *Scrape {
		name, byLabel := in.Name, false
		for _, l := range []string{"instance", "pod", "member"} {
			if v := labels[l]; v != "" {
				name, byLabel = v, true
				break
			}
		}
		s := byMember[name]
		if s == nil {
			s = &Scrape{Source: in.Name, Member: name, ByLabel: byLabel, At: in.At, Leader: -1, Cleaned: cleaned}
			byMember[name] = s
			order = append(order, name)
		}
		return s
	}
	for _, fam := range []etcdmetric.Family{etcdmetric.WALFsync, etcdmetric.BackendCommit, etcdmetric.PeerRTT} {
		series, err := etcdmetric.Histograms(fams, fam)
		if err != nil {
			return nil, err
		}
		for i := range series {
			s := series[i]
			sc := get(s.Labels)
			switch fam.Name {
			case etcdmetric.WALFsync.Name:
				sc.WAL = &s
				sc.WALName = fam.Name
				if old := fam.Old[0]; fams[old] != nil || fams[old+"_bucket"] != nil {
					sc.WALName = old
				}
			case etcdmetric.BackendCommit.Name:
				sc.Backend = &s
			default:
				sc.Peers = append(sc.Peers, s)
			}
		}
	}
	if len(order) == 0 {
		if !hasEtcd(fams) {
			return nil, fmt.Errorf("no etcd metric in the text")
		}
		get(nil)
	}
	// Single-valued facts: taken when there is one member in the text.
	if len(order) == 1 {
		s := byMember[order[0]]
		if v, ok := etcdmetric.Gauge(fams, "process_start_time_seconds"); ok && v > 0 {
			s.ProcessStart = time.Unix(int64(v), 0).UTC()
		}
		if v, ok := etcdmetric.Gauge(fams, "etcd_server_is_leader"); ok {
			s.Leader = int(v)
		}
		if f := fams["etcd_server_id"]; f != nil && len(f.Metric) > 0 {
			s.ServerID = label(f.Metric[0], "server_id")
		}
	}
	out := make([]Scrape, 0, len(order))
	for _, n := range order {
		out = append(out, *byMember[n])
	}
	return out, nil
}

func hasEtcd(fams map[string]*dto.MetricFamily) bool {
	for n := range fams {
		if strings.HasPrefix(n, "etcd_") {
			return true
		}
	}
	return false
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// The windows of a member's numbers (MemberWindow.Window, MemberRow.Window).
const (
	// WindowSinceStart: one scrape, totals since the process started.
	WindowSinceStart = "since start"
	// WindowBetweenScrapes: the difference of the first and last scrape.
	WindowBetweenScrapes = "between scrapes"
	// WindowSinceRestart: counts fell between the scrapes (etcd
	// restarted): the later scrape whole.
	WindowSinceRestart = "since restart"
	// WindowSinceRestartAsGiven: the same, told from scrapes without
	// fetch times or process_start_time_seconds, taken in the order
	// given (render words it so in full).
	WindowSinceRestartAsGiven = "since restart, as given"
)

// MemberWindow is one member's histograms over the window the evidence
// covers: the difference of its first and last scrape, or one scrape's
// totals since the process started.
type MemberWindow struct {
	Member  string   `json:"member"`
	Sources []string `json:"sources"`
	// Window: WindowSinceStart, WindowBetweenScrapes, WindowSinceRestart
	// or WindowSinceRestartAsGiven.
	Window   string        `json:"window"`
	Duration time.Duration `json:"duration_ns,omitempty"`
	// From, To: the wall-clock span the numbers cover where the inputs
	// say it (fetch times, process start, a Prometheus export's samples);
	// zero when unknown (a hand-saved scrape).
	From    time.Time           `json:"from,omitzero"`
	To      time.Time           `json:"to,omitzero"`
	Leader  int                 `json:"is_leader"`
	WAL     *etcdmetric.Series  `json:"wal_fsync,omitempty"`
	WALName string              `json:"wal_name,omitempty"`
	Backend *etcdmetric.Series  `json:"backend_commit,omitempty"`
	Peers   []etcdmetric.Series `json:"peer_rtt,omitempty"`
}

// Members groups scrapes by member and reduces each member's scrapes to
// one window. Two scrapes are of the same member when their etcd_server_id
// matches, or their instance label, or they are one URL polled twice,
// or (both unlabelled) their process
// start time matches, or their peer RTT series name the same set of peers
// (in a cluster each member's To set leaves out itself). Otherwise every
// input is its own member, named by its file name.
func Members(scrapes []Scrape) []MemberWindow {
	var groups [][]Scrape
	for _, s := range scrapes {
		placed := false
		for gi, g := range groups {
			if sameMember(g[0], s) {
				groups[gi] = append(groups[gi], s)
				placed = true
				break
			}
		}
		if !placed {
			groups = append(groups, []Scrape{s})
		}
	}
	var out []MemberWindow
	for _, g := range groups {
		out = append(out, window(g))
	}
	return out
}

func sameMember(a, b Scrape) bool {
	switch {
	case a.ServerID != "" && b.ServerID != "":
		return a.ServerID == b.ServerID
	case a.ByLabel && b.ByLabel:
		return a.Member == b.Member
	case a.Source == b.Source:
		// one URL polled twice, or several members of one federated text
		return !a.At.IsZero() && !a.At.Equal(b.At) && a.Member == b.Member
	case !a.ProcessStart.IsZero() && !b.ProcessStart.IsZero() && a.ProcessStart.Equal(b.ProcessStart):
		return true
	}
	ta, tb := toSet(a), toSet(b)
	return ta != "" && ta == tb
}

func toSet(s Scrape) string {
	var to []string
	for _, p := range s.Peers {
		to = append(to, p.Key.To)
	}
	sort.Strings(to)
	return strings.Join(to, ",")
}

// window reduces one member's scrapes: ordered by fetch time, else by
// process start, else by the WAL count; the first is subtracted from the
// last. A fall in any count (a restart) keeps the last scrape whole.
// Without times or process starts the count order is kept only when it
// is a forward one (every count and cumulative bucket grows); otherwise
// etcd restarted between them and only the order given can tell which
// came last: the window says so.
func window(g []Scrape) MemberWindow {
	given := slices.Clone(g)
	sort.SliceStable(g, func(i, j int) bool {
		a, b := g[i], g[j]
		if !a.At.IsZero() && !b.At.IsZero() && !a.At.Equal(b.At) {
			return a.At.Before(b.At)
		}
		if !a.ProcessStart.Equal(b.ProcessStart) && !a.ProcessStart.IsZero() && !b.ProcessStart.IsZero() {
			return a.ProcessStart.Before(b.ProcessStart)
		}
		return count(a.WAL) < count(b.WAL)
	})
	asGiven := false
	if len(g) > 1 && !timed(g) && !forward(g[0], g[len(g)-1]) {
		g, asGiven = given, true
	}
	first, last := g[0], g[len(g)-1]
	w := MemberWindow{Member: last.Member, Leader: last.Leader, WAL: last.WAL, WALName: last.WALName, Backend: last.Backend, Peers: last.Peers, Window: WindowSinceStart}
	if !last.ByLabel && last.ServerID != "" {
		w.Member = last.ServerID
	}
	for _, s := range g {
		w.Sources = append(w.Sources, s.Source)
	}
	w.From, w.To = first.At, last.At
	if len(g) == 1 {
		// Totals since the process started.
		w.From = last.ProcessStart
		if w.To.IsZero() {
			w.From = time.Time{}
		}
		return w
	}
	w.Window = WindowBetweenScrapes
	if !first.At.IsZero() && !last.At.IsZero() {
		w.Duration = last.At.Sub(first.At)
	}
	// A delta whose cumulative buckets fall is no forward delta either:
	// a restart whatever the order.
	reset := !first.ProcessStart.IsZero() && !last.ProcessStart.IsZero() && !first.ProcessStart.Equal(last.ProcessStart) || !forward(first, last)
	sub := func(a, b *etcdmetric.Series) *etcdmetric.Series {
		if b == nil {
			return nil
		}
		d, r := etcdmetric.Delta(a, *b)
		if r {
			reset = true
		}
		return &d
	}
	w.WAL = sub(first.WAL, last.WAL)
	w.Backend = sub(first.Backend, last.Backend)
	start := map[etcdmetric.Key]*etcdmetric.Series{}
	for i := range first.Peers {
		start[first.Peers[i].Key] = &first.Peers[i]
	}
	w.Peers = nil
	for _, p := range last.Peers {
		w.Peers = append(w.Peers, *sub(start[p.Key], &p))
	}
	if reset {
		// Delta took the restarted series whole; keep all of them whole
		// so the window is one: since the restart.
		w.Window = WindowSinceRestart
		if asGiven {
			w.Window = WindowSinceRestartAsGiven
		}
		w.WAL, w.Backend, w.Peers = last.WAL, last.Backend, last.Peers
		w.From = last.ProcessStart
		if w.To.IsZero() {
			w.From = time.Time{}
		}
	}
	return w
}

// timed reports whether every pair of g can be ordered by fetch time or
// by process start.
func timed(g []Scrape) bool {
	for _, s := range g {
		if s.At.IsZero() && s.ProcessStart.IsZero() {
			return false
		}
	}
	return true
}

// forward reports whether b can follow a without a restart: every count
// and cumulative bucket of every series grows or stays.
func forward(a, b Scrape) bool {
	ok := func(x, y *etcdmetric.Series) bool {
		if x == nil || y == nil {
			return true
		}
		d, reset := etcdmetric.Delta(x, *y)
		if reset {
			return false
		}
		for i := 1; i < len(d.Buckets); i++ {
			if d.Buckets[i].Count < d.Buckets[i-1].Count {
				return false
			}
		}
		return true
	}
	if !ok(a.WAL, b.WAL) || !ok(a.Backend, b.Backend) {
		return false
	}
	for i := range b.Peers {
		for j := range a.Peers {
			if a.Peers[j].Key == b.Peers[i].Key && !ok(&a.Peers[j], &b.Peers[i]) {
				return false
			}
		}
	}
	return true
}

func count(s *etcdmetric.Series) float64 {
	if s == nil {
		return 0
	}
	return s.Count
}

// anonymous: nothing in s tells which member it is (a hand excerpt).
func anonymous(s Scrape) bool {
	return s.ServerID == "" && !s.ByLabel && s.ProcessStart.IsZero() && s.At.IsZero() && len(s.Peers) == 0
}

// sameLadder: both WAL histograms have the same name and bucket bounds.
func sameLadder(a, b Scrape) bool {
	if a.WAL == nil || b.WAL == nil || a.WALName != b.WALName || len(a.WAL.Buckets) != len(b.WAL.Buckets) {
		return false
	}
	for i := range a.WAL.Buckets {
		if a.WAL.Buckets[i].UpperBound != b.WAL.Buckets[i].UpperBound {
			return false
		}
	}
	return true
}

// scrapesAlike adds a finding for each pair of inputs that Members read as
// two members only for want of an identity, and that look like two scrapes
// of one member: both anonymous, the same WAL series and bucket ladder,
// and every count of one at least the other's (a forward delta) but not
// all equal. Which it is cannot be told from the text; the finding says
// how to ask for the difference. It returns the inputs named.
func (r *Report) scrapesAlike(scrapes []Scrape) []string {
	var named []string
	for i := range scrapes {
		for j := i + 1; j < len(scrapes); j++ {
			a, b := scrapes[i], scrapes[j]
			if a.Source == b.Source || !anonymous(a) || !anonymous(b) || !sameLadder(a, b) || count(a.WAL) == count(b.WAL) {
				continue
			}
			if count(a.WAL) > count(b.WAL) {
				a, b = b, a
			}
			if !forward(a, b) {
				continue
			}
			r.Findings = append(r.Findings, Finding{Topic: TopicInputs, Subject: a.Source + ", " + b.Source, Severity: Unknown,
				Alike: &AlikeFacts{A: a.Source, B: b.Source, WALName: a.WALName, More: count(b.WAL) - count(a.WAL)}})
			named = append(named, a.Source, b.Source)
		}
	}
	slices.Sort(named)
	return slices.Compact(named)
}
