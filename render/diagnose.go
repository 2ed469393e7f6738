package render

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/etcdscope/etcdscope/analysis/diagnose"
)

// DiagnoseJSON writes diagnose's report as one indented JSON object, its
// typed findings worded (diagnose_words.go).
func DiagnoseJSON(w io.Writer, r diagnose.Report) error {
	r = wordedReport(r)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Diagnose writes diagnose's report for a terminal: the findings worst
// first (what a user reads first), each with its evidence, uncertainty,
// meaning for commit latency and next command; then the inputs, one row
// per member (WAL fsync and backend commit), one per peer series, and the
// inputs not read.
func Diagnose(w io.Writer, r diagnose.Report) error {
	var b strings.Builder
	b.WriteString("etcdscope diagnose\n")
	writeFindings(&b, r)
	switch n := len(r.Inputs) + len(r.Unread); {
	case n > 1 && r.OneMember:
		b.WriteString("\ninputs (read as one member's, --one-member: its scrapes' difference):\n")
	case n > 1:
		b.WriteString("\ninputs (read as one cluster's: its members' evidence together):\n")
	default:
		b.WriteString("\ninput:\n")
	}
	writeInputs(&b, r)
	writeTables(&b, r)
	_, err := io.WriteString(w, b.String())
	return err
}

// ClusterReport is one cluster's diagnosis when the inputs name two or
// more clusters (diagnose.SplitClusters).
type ClusterReport struct {
	// Cluster: its ID or label; "" for the inputs that name none.
	Cluster string          `json:"cluster"`
	Report  diagnose.Report `json:"report"`
}

// DiagnoseClusters writes one report per cluster for a terminal: a line
// per cluster with its inputs' count, then each cluster's findings, inputs
// and tables as Diagnose writes one cluster's.
func DiagnoseClusters(w io.Writer, rs []ClusterReport) error {
	var b strings.Builder
	named := 0
	for _, r := range rs {
		if r.Cluster != "" {
			named++
		}
	}
	fmt.Fprintf(&b, "etcdscope diagnose\n\nthe inputs name %d clusters; each is diagnosed apart:\n", named)
	for _, r := range rs {
		fmt.Fprintf(&b, "  %-40s %s\n", clusterName(r.Cluster), counted(len(r.Report.Inputs)+len(r.Report.Unread), "input"))
	}
	for _, r := range rs {
		fmt.Fprintf(&b, "\n\n=== %s\n", clusterName(r.Cluster))
		writeFindings(&b, r.Report)
		b.WriteString("\ninputs:\n")
		writeInputs(&b, r.Report)
		writeTables(&b, r.Report)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// DiagnoseClustersJSON writes every cluster's report as one indented JSON
// object {"clusters": [{"cluster": ..., "report": ...}]}.
func DiagnoseClustersJSON(w io.Writer, rs []ClusterReport) error {
	out := make([]ClusterReport, len(rs))
	for i, r := range rs {
		r.Report = wordedReport(r.Report)
		out[i] = r
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Clusters []ClusterReport `json:"clusters"`
	}{out})
}

// clusterName names a cluster group as the report heads it.
func clusterName(c string) string {
	if c == "" {
		return "inputs that name no cluster"
	}
	if strings.Contains(c, "=") {
		return "cluster " + c
	}
	return "cluster ID " + c
}

// writeInputs writes one line per input read: its kind, name and note.
func writeInputs(b *strings.Builder, r diagnose.Report) {
	for _, in := range r.Inputs {
		fmt.Fprintf(b, "  %-10s %s", in.Kind, OneLine(in.Name))
		if note := inputNoteShort(in); note != "" {
			fmt.Fprintf(b, "  (%s)", note)
		}
		b.WriteString("\n")
		if c := in.Counts; c != nil && in.Kind == diagnose.KindMetrics && len(c.Rejected) > 0 {
			fmt.Fprintf(b, "  %-10s e.g. %s\n", "", rejectedExample(c))
		}
	}
}

// writeTables writes a report's member, peer and fio tables and the
// inputs not read.
func writeTables(b *strings.Builder, r diagnose.Report) {
	if len(r.Members) > 0 {
		b.WriteString("\ndisk (per member; WAL fsync budget p99 < 10ms, backend commit p99 < 25ms):\n")
		fmt.Fprintf(b, "  %-28s %-16s %10s %9s %9s %9s %10s %9s %9s %9s\n", "member", "window", "wal n", "p50", "p99", "mean", "commit n", "p50", "p99", "mean")
		asGiven := false
		for _, m := range r.Members {
			if m.Window == diagnose.WindowSinceRestartAsGiven {
				// The column is 16 wide: the label with a mark, the why
				// under the table.
				m.Window, asGiven = "since restart*", true
			}
			if absent(m.WAL) && absent(m.Backend) {
				// A member known only from its peer series (an excerpt of
				// the RTT histogram): a row of dashes would read as a disk
				// that did nothing.
				fmt.Fprintf(b, "  %-28s %-16s (no WAL fsync or backend commit histogram in this input)\n", trunc(m.Member, 28), m.Window)
				continue
			}
			fmt.Fprintf(b, "  %-28s %-16s %s %s\n", trunc(m.Member, 28), m.Window, histCols(m.WAL), histCols(m.Backend))
		}
		if asGiven {
			fmt.Fprintf(b, "  * %s: %s\n", diagnose.WindowSinceRestartAsGiven, asGivenWhy)
		}
	}
	if len(r.Peers) > 0 {
		b.WriteString("\npeer RTT (etcd_network_peer_round_trip_time_seconds):\n")
		fmt.Fprintf(b, "  %-28s %-18s %-10s %8s %9s %9s %9s  %s\n", "member", "to", "prober", "n", "p50", "p99", "mean", "humps")
		for _, p := range r.Peers {
			prober := p.Prober
			if prober == "" {
				prober = "both"
			}
			fmt.Fprintf(b, "  %-28s %-18s %-10s %s  %s\n", trunc(p.Member, 28), p.To, trunc(strings.TrimPrefix(prober, "ROUND_TRIPPER_"), 10), histCols(p.Stats), p.Modes.Verdict)
		}
	}
	if len(r.Fio) > 0 {
		b.WriteString("\nfio (fdatasync after each write):\n")
		// The file's own name and the job, as wide as the longest (at
		// most 48): the directories are the same for most pastes.
		name := func(f diagnose.FioRun) string { return strings.TrimSpace(filepath.Base(f.Source) + " " + f.Job) }
		width := 0
		for _, f := range r.Fio {
			width = min(max(width, utf8.RuneCountInString(name(f))), 48)
		}
		for _, f := range r.Fio {
			q := func(p float64) string {
				if v, ok := f.P(p); ok {
					return formatDuration(v)
				}
				return "-"
			}
			max := "-"
			if f.SyncMax > 0 {
				max = formatDuration(f.SyncMax)
			}
			syncs := "no sync" // the job never synced: its numbers are not the WAL's
			switch {
			case f.HasSync && f.SyncCount > 0:
				syncs = fmt.Sprintf("%.0f syncs", f.SyncCount)
			case f.HasSync:
				syncs = "synced"
			case f.Synced(): // asked for, cut from the paste or not printed
				syncs = "syncs unshown"
			}
			fmt.Fprintf(b, "  %-*s  %-13s p50 %-10s p99 %-10s p99.9 %-10s max %s\n", width, trunc(name(f), width), syncs, q(50), q(99), q(99.9), max)
		}
	}
	if len(r.Unread) > 0 {
		b.WriteString("\nnot read (left out of the findings):\n")
		for _, u := range r.Unread {
			fmt.Fprintf(b, "  %s: %s\n", OneLine(u.Name), OneLine(unreadText(u)))
			for _, q := range u.Quoted {
				fmt.Fprintf(b, "    %s\n", OneLine(q))
			}
		}
	}
}

// writeFindings writes a report's findings, worst first.
func writeFindings(b *strings.Builder, r diagnose.Report) {
	b.WriteString("\nfindings:\n")
	findings := worded(r.Findings)
	for _, sev := range []diagnose.Severity{diagnose.Bad, diagnose.Warn, diagnose.Unknown, diagnose.OK} {
		for _, f := range findings {
			if f.Severity != sev {
				continue
			}
			fmt.Fprintf(b, "\n[%s] %s %s: %s\n", strings.ToUpper(string(f.Severity)), f.Topic, OneLine(f.Subject), OneLine(f.Summary))
			for _, e := range f.Evidence {
				fmt.Fprintf(b, "    evidence: %s\n", OneLine(e))
			}
			for _, u := range f.Uncertainty {
				fmt.Fprintf(b, "    uncertain: %s\n", OneLine(u))
			}
			if f.Meaning != "" {
				fmt.Fprintf(b, "    for commit latency: %s\n", OneLine(f.Meaning))
			}
			if f.Next != "" {
				fmt.Fprintf(b, "    next: %s\n", OneLine(f.Next))
			}
		}
	}
}

// DiagnoseFleetJSON writes diagnose --prometheus's fleet as one indented
// JSON object.
func DiagnoseFleetJSON(w io.Writer, fl diagnose.Fleet) error {
	for i := range fl.Clusters {
		fl.Clusters[i].Report = wordedReport(fl.Clusters[i].Report)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(fl)
}

// DiagnoseFleet writes diagnose --prometheus's fleet for a terminal: the
// source and window, one line per cluster worst first, what was cut, then
// each cluster's findings and tables as Diagnose writes one cluster's.
func DiagnoseFleet(w io.Writer, fl diagnose.Fleet) error {
	var b strings.Builder
	fmt.Fprintf(&b, "etcdscope diagnose --prometheus %s\n\nwindow %s to %s (%s)", fl.Source, fl.From.UTC().Format(time.RFC3339), fl.To.UTC().Format(time.RFC3339), fl.To.Sub(fl.From).Round(time.Second))
	if fl.Match != "" {
		fmt.Fprintf(&b, ", series matching %s", fl.Match)
	}
	b.WriteString("\nqueries:\n")
	for _, q := range fl.Queries {
		fmt.Fprintf(&b, "  %6d series  %s\n", q.Series, q.Selector)
	}
	fmt.Fprintf(&b, "\nclusters (by %s, namespace and job; members by instance), worst first:\n", strings.Join(diagnose.ClusterLabels, ", "))
	if len(fl.Clusters) == 0 {
		b.WriteString("  none: no etcd series in the window (check --match and the window)\n")
	}
	for _, c := range fl.Clusters {
		fmt.Fprintf(&b, "  %-7s %-48s %s\n", strings.ToUpper(string(c.Severity)), c.Name, counted(len(c.Report.Members), "member"))
	}
	if fl.Cut != nil {
		fmt.Fprintf(&b, "  … %s more not shown (--max-clusters), none worse than %s: %s\n", counted(fl.Cut.Clusters, "cluster"), strings.ToUpper(string(fl.Cut.Worst)), strings.Join(fl.Cut.Names, "; "))
	}
	for _, c := range fl.Clusters {
		fmt.Fprintf(&b, "\n\n=== cluster %s: %s\n", c.Name, strings.ToUpper(string(c.Severity)))
		writeFindings(&b, c.Report)
		writeTables(&b, c.Report)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// wordedReport: r with its findings worded and each peer series' modes
// given their why, in copies (r's slices are not written).
func wordedReport(r diagnose.Report) diagnose.Report {
	r.Findings = worded(r.Findings)
	inputs := make([]diagnose.InputInfo, len(r.Inputs))
	for i, in := range r.Inputs {
		in.Note = inputNote(in)
		inputs[i] = in
	}
	if r.Inputs != nil {
		r.Inputs = inputs
	}
	if r.Unread != nil {
		unread := make([]diagnose.Unread, len(r.Unread))
		for i, u := range r.Unread {
			u.Err = unreadText(u)
			unread[i] = u
		}
		r.Unread = unread
	}
	members := make([]diagnose.MemberRow, len(r.Members))
	for i, m := range r.Members {
		m.WAL, m.Backend = wordedStats(m.WAL), wordedStats(m.Backend)
		m.Window = windowText(m.Window)
		members[i] = m
	}
	if r.Members != nil {
		r.Members = members
	}
	peers := make([]diagnose.PeerRow, len(r.Peers))
	for i, p := range r.Peers {
		p.Modes.Why = modesWhy(p.Modes)
		p.Stats = wordedStats(p.Stats)
		peers[i] = p
	}
	if r.Peers != nil {
		r.Peers = peers
	}
	return r
}

// worded: a copy of fs with every typed finding worded.
func worded(fs []diagnose.Finding) []diagnose.Finding {
	out := make([]diagnose.Finding, len(fs))
	for i, f := range fs {
		out[i] = wordFinding(f)
	}
	return out
}

// absent: no series behind h at all (Stats of nil), as opposed to a
// series whose numbers could not be estimated (Error set).
func absent(h diagnose.HistStats) bool {
	return !h.HasCount && !h.HasMean && h.P50 == nil && h.P99 == nil && h.Error == ""
}

func histCols(h diagnose.HistStats) string {
	n := "-"
	if h.HasCount {
		n = fmt.Sprintf("%.0f", h.Observations)
	}
	mean := "-"
	if h.HasMean {
		mean = formatSeconds(h.Mean)
	}
	return fmt.Sprintf("%10s %9s %9s %9s", n, formatEstimate(h.P50), formatEstimate(h.P99), mean)
}

func trunc(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}

// ownOutputText is why diagnose did not read one of etcdscope's own
// outputs (what: diagnose.OwnOutputError.What), and what reads it.
func ownOutputText(what string) string {
	var read string
	switch what {
	case "serve":
		return "etcdscope serve's /metrics, not etcd's: give etcd's own (e.g. http://127.0.0.1:2381/metrics)"
	case "peers_recording", "etcd_peer_metric", "peer event":
		read = "draw it with etcdscope report --html OUT.html --peers FILE FSYNC-RECORDING"
	case "commit", "commit_summary", "cluster_summary":
		read = "its last line is that run's summary (docs/schema.md)"
	default:
		read = "read it with etcdscope report FILE"
	}
	return fmt.Sprintf("etcdscope's own output (its %q lines), not etcd's evidence: %s", what, read)
}

// DiagnoseUnreadError is the usage error's line when no input could be
// read and the first was etcdscope's own output (u.Own): its name and
// what reads it.
func DiagnoseUnreadError(u diagnose.Unread) string {
	return EscapeLine(u.Name) + ": " + EscapeLine(unreadText(u))
}

// unreadText is why an input was not read: its error, or for a fleet
// cluster with too few samples on the grid, the history Prometheus holds
// and the window that reads it (the flag given: --last when the window
// ends now, else --since).
func unreadText(u diagnose.Unread) string {
	if u.Own != "" {
		return ownOutputText(u.Own)
	}
	v := u.Few
	if v == nil {
		return u.Err
	}
	head := fmt.Sprintf("the %d etcd series have fewer than two samples on the query grid (a point every %s)", v.Series, v.Step)
	held := v.Probe.Held().Round(time.Second)
	switch {
	case v.Last == 0:
		return head + ": Prometheus holds one sample of each of these series at most: wait a scrape interval or two and run again"
	case v.EndsNow:
		return fmt.Sprintf("%s: Prometheus holds %s of these series: use --last %s or wait", head, held, v.Last)
	}
	first := v.Probe.First.UTC().Format(time.RFC3339)
	return fmt.Sprintf("%s: Prometheus holds %s of these series, from %s: use --since %s or wait", head, held, first, first)
}
