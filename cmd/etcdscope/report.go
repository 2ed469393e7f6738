package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/diagnose"
	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/analysis/jsonl"
	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/capture"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/internal/safefile"
	"github.com/etcdscope/etcdscope/pipeline"
	"github.com/etcdscope/etcdscope/render"
	"github.com/etcdscope/etcdscope/report"
)

func init() {
	subcommands["report"] = subcommand{
		summary: "recompute the fsync report from a recording (etcdscope fsync --output json), as a table, JSON or an HTML page, or replay a capture (fsync or peers --capture F)",
		run:     runReport,
	}
}

func runReport(args []string) error {
	fs := newFlagSet("report")
	output := fs.String("output", "table", "table or json")
	htmlOut := fs.String("html", "", "write a self-contained HTML page (layer split, latency heatmap, peer RTT) to this file instead")
	peersIn := fs.String("peers", "", "with --html: a peers recording or capture (etcdscope peers --record or --capture) for the per-peer RTT section")
	mergeIn := fs.String("merge", "", "with --html: etcdscope merge --output json of this guest recording, for the guest | virtualization | host section")
	failOverBudget := fs.Bool("fail-over-budget", false, failOverBudgetUsage)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errHelp
		}
		return usagef("%v (see 'etcdscope report --help')", err)
	}
	if *output != "table" && *output != "json" {
		return usagef("--output %q: use table or json", *output)
	}
	if (*peersIn != "" || *mergeIn != "") && *htmlOut == "" {
		return usagef("--peers and --merge go with --html")
	}
	if *htmlOut != "" && fs.Changed("output") {
		return usagef("--html writes a page; drop --output")
	}
	if *htmlOut != "" {
		if st, err := os.Stat(*htmlOut); err == nil && st.IsDir() {
			return usagef("--html %s is a directory: give a file name, e.g. %s", *htmlOut, filepath.Join(*htmlOut, "report.html"))
		}
		if err := safefile.CheckDir(*htmlOut); err != nil {
			return usagef("--html %s: %v", *htmlOut, err)
		}
		if st, err := os.Stat(filepath.Dir(*htmlOut)); err != nil || !st.IsDir() {
			return usagef("--html %s: its directory does not exist", *htmlOut)
		}
	}
	if fs.NArg() != 1 {
		return usagef("give one recording file, e.g. etcdscope report trace.jsonl")
	}
	var in io.Reader = os.Stdin
	if name := fs.Arg(0); name != "-" {
		f, err := safefile.OpenInput(name)
		if err != nil {
			return usagef("%v: give a readable recording (etcdscope fsync --output json > F, or - for stdin) or capture (fsync or peers --capture F)", err)
		}
		defer f.Close()
		in = f
	}
	br := bufio.NewReaderSize(in, 64<<10)
	var (
		replayed chan error     // the capture's replay into the page's recording
		replayR  *io.PipeReader // its read end, closed to end a replay the scan left
	)
	if isCapture(br) {
		if *htmlOut == "" {
			return replayCapture(br, fs.Arg(0), *output, *failOverBudget)
		}
		// The page reads a recording: the capture's replay (its records
		// and summary, as --output json prints them) streams into it.
		rd, err := capture.NewReader(br)
		if err != nil {
			return usagef("reading %s: %v", fs.Arg(0), err)
		}
		if t := rd.Header().Tracer; t != capture.TracerFsync {
			return usagef("%s is a %s capture: the page draws fsync calls from an fsync recording or capture; give this one with --peers (etcdscope report --html %s --peers %s FSYNC-RECORDING), or without --html for its table", fs.Arg(0), t, *htmlOut, fs.Arg(0))
		}
		pr, pw := io.Pipe()
		replayR = pr
		replayed = make(chan error, 1)
		go func() {
			err := replayFsync(rd, fs.Arg(0), pw, "json", false)
			pw.CloseWithError(err)
			replayed <- err
		}()
		br = bufio.NewReaderSize(pr, 64<<10)
	}
	head, _ := br.Peek(br.Size())
	head = bytes.Clone(head) // the scan below reuses the buffer
	// The recording streams through the live run's sink: the table and the
	// JSON summary hold only the report's state, not the recording (a 600
	// MB recording held whole peaked at 1.37 GB); the page keeps what it
	// draws of each call (report.Call), of at most report.MaxPageCalls.
	var (
		calls *report.CallSample
		count int64
		rs    = pipeline.NewReportSink(false)
	)
	if *htmlOut != "" {
		calls = report.NewCallSample()
	}
	sum, err := analysis.ScanJSONL(br, func(r *analysis.FsyncRecord) error {
		if count++; calls != nil {
			calls.Add(r)
		}
		return rs.Fsync(r)
	}, rs.Write)
	if replayed != nil {
		// A scan that stopped early leaves the replay blocked on the
		// pipe: closing the read end ends it (its write error is then
		// the scan's doing, not the replay's).
		replayR.Close()
		if rerr := <-replayed; rerr != nil && !errors.Is(rerr, io.ErrClosedPipe) {
			return rerr // the replay's own error says it better than the scan's
		}
	}
	if err != nil {
		// Evidence users already have (a /metrics scrape, etcd's log,
		// fio's output) is diagnose's input, not a recording.
		if kind, derr := diagnose.Detect(head); derr == nil {
			return usagef("%s is %s, not a recording: run etcdscope diagnose %s", fs.Arg(0), kindName(kind), fs.Arg(0))
		}
		if errors.Is(err, analysis.ErrCommitRecording) {
			// No command reads it back yet: its commit_summary line is
			// the run's summary (docs/schema.md).
			return usagef("%s is a commit recording (etcdscope commit --output json), not an fsync one: report reads fsync recordings; its last line, commit_summary, is that run's summary (docs/schema.md)", fs.Arg(0))
		}
		if errors.Is(err, analysis.ErrPeersRecording) {
			if *htmlOut != "" {
				return usagef("%s is a peers recording: the page draws fsync calls from an fsync recording or capture; give this one with --peers (etcdscope report --html %s --peers %s FSYNC-RECORDING)", fs.Arg(0), *htmlOut, fs.Arg(0))
			}
			return usagef("%s is a peers recording: report replays a peers --capture as a table, or draws a recording on the page (etcdscope report --html OUT.html --peers %s FSYNC-RECORDING)", fs.Arg(0), fs.Arg(0))
		}
		if errors.Is(err, analysis.ErrHypervisorRecording) {
			return usagef("%s is a hypervisor recording (etcdscope hypervisor --output json), not an fsync one: give it to etcdscope merge --guest GUEST.jsonl --host %s, with the guest's etcdscope fsync --output json", fs.Arg(0), fs.Arg(0))
		}
		return usagef("%s: %v: give a recording written by 'etcdscope fsync --output json'", fs.Arg(0), err)
	}
	if count == 0 && sum.Type != "summary" {
		return usagef("%s has no fsync records (write one with etcdscope fsync --output json)", fs.Arg(0))
	}
	// A run that saw no call (etcd idle) wrote its summary alone: its
	// report is of zero calls, as the run printed.
	// A run killed before its end leaves no summary line: its loss is
	// unknown, not 0 (said after the inputs are read: bad input stays
	// one line).
	noSummary := sum.Type != "summary"
	if noSummary {
		sum.LossCut = analysis.LossNoSummary
	}
	// A recording made with --min-latency holds only the slow calls, and
	// a table of those alone would read as the run's: its summary line,
	// which the live run built from every call, is the report and the
	// budget's verdict instead (the page draws what the records hold).
	filtered := !noSummary && sum.Fsyncs > count
	warn := func() {
		switch {
		case noSummary:
			fmt.Fprintln(os.Stderr, render.ReportNoSummary(fs.Arg(0)))
		case filtered && *htmlOut != "":
			fmt.Fprintln(os.Stderr, render.ReportFiltered(fs.Arg(0), count, sum.Fsyncs, true))
		case filtered:
			fmt.Fprintln(os.Stderr, render.ReportFiltered(fs.Arg(0), count, sum.Fsyncs, false))
		}
	}
	rep := sum
	rs.SetMissedPrograms(sum.MissedPrograms)
	if !filtered {
		rep = rs.Report(sum.LostEvents, sum.MissedEvents, sum.Unavailable)
		rep.LossCut, rep.LossUnknown = sum.LossCut, sum.LossUnknown
		rep.SetDiskCaches(sum.Disks) // the recording machine's, not this one's
		rep.SetJournals(sum.Journals)
	}
	if *htmlOut != "" {
		page := rs.Report(sum.LostEvents, sum.MissedEvents, sum.Unavailable) // of the records, as the page draws them
		if err := writeHTMLReport(*htmlOut, fs.Arg(0), *peersIn, *mergeIn, calls, &page, sum); err != nil {
			return err
		}
		warn()
		return checkBudget(*failOverBudget, rep)
	}
	warn()
	if *output == "json" {
		if err := render.SummaryJSON(render.JSONText(os.Stdout), &rep); err != nil {
			return err
		}
	} else if err := render.FsyncReport(os.Stdout, &rep); err != nil {
		return err
	}
	return checkBudget(*failOverBudget, rep)
}

// kindName says what diagnose recognised, for report's pointer to it.
func kindName(k diagnose.Kind) string {
	switch k {
	case diagnose.KindMetrics:
		return "an etcd /metrics text"
	case diagnose.KindPromJSON:
		return "a Prometheus API answer"
	case diagnose.KindLog:
		return "an etcd log"
	case diagnose.KindFioJSON, diagnose.KindFioText:
		return "fio's output"
	case diagnose.KindEtcdctl:
		return "etcdctl's output"
	}
	return string(k)
}

// isCapture reports whether the input opens with a capture header line.
func isCapture(br *bufio.Reader) bool {
	b, _ := br.Peek(br.Size())
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	var h jsonl.Head
	return json.Unmarshal(b, &h) == nil && capture.IsCapture(h)
}

// replayCapture runs a capture's events through the attribution and
// prints what the live run printed: the report table, or with --output
// json the fsync records and the summary (peers: the table or the JSON
// object, without the etcd metric comparison, which a capture does not
// hold).
func replayCapture(in io.Reader, name, output string, failOverBudget bool) error {
	rd, err := capture.NewReader(in)
	if err != nil {
		return usagef("reading %s: %v", name, err)
	}
	switch rd.Header().Tracer {
	case capture.TracerFsync:
		return replayFsync(rd, name, os.Stdout, output, failOverBudget)
	case capture.TracerPeers:
		return replayPeers(rd, name, output)
	}
	return usagef("%s: capture of tracer %q: this etcdscope replays fsync and peers captures", name, rd.Header().Tracer)
}

// replayDecodeErrors is a replay's end of the decode error policy: a
// capture's lines that did not decode are bad input (a capture cut short
// ends in a partial line), not a tracer and BPF object mismatch as in a
// live run (decodeErrors). Exit 2, after the report of what did decode.
func replayDecodeErrors(name string, n uint64) error {
	if n == 0 {
		return nil
	}
	return usagef("%s: %d capture line(s) could not be decoded (a capture cut short ends in a partial line: copy it whole); the report above misses those events", name, n)
}

func replayFsync(rd *capture.Reader, name string, dst io.Writer, output string, failOverBudget bool) error {
	rs := pipeline.NewReportSink(false)
	var tooLarge error // the first fact past the Reader's bounds
	cfg := pipeline.FsyncLoopConfig{Host: pipeline.ReplayHost(rd), Sinks: []pipeline.FsyncSink{rs}, Sched: rd.Header().Sched,
		OnDecodeError: func(err error) {
			if errors.Is(err, capture.ErrTooLarge) && tooLarge == nil {
				tooLarge = err
			}
		}}
	if d := rd.Header().Disk; d != "" {
		dev, err := capture.ParseDev(d)
		if err != nil {
			return usagef("%s: header: %v", name, err)
		}
		cfg.Disk = dev
	}
	out := dst
	if output == "json" {
		out = render.JSONText(out)
	}
	w := bufio.NewWriter(out)
	var lines *render.JSONLines
	if output == "json" {
		lines = render.NewJSONLines(w, 0)
		cfg.Sinks = append(cfg.Sinks, lines)
	}
	p := pipeline.NewFsyncLoop(cfg)
	err := p.Run(pipeline.ReadFunc(rd.ReadEvent))
	if lines != nil {
		if cerr := lines.Close(); err == nil {
			err = cerr
		}
	}
	if tooLarge != nil {
		return usagef("replaying %s: %v: give a capture etcdscope fsync --capture wrote", name, tooLarge)
	}
	if err != nil {
		return fmt.Errorf("replaying %s: %w", name, err)
	}
	end, ok := rd.End()
	if !ok {
		fmt.Fprintln(os.Stderr, render.ReportNoEndLine(name))
	}
	rep := rs.Report(end.LostEvents, end.MissedEvents, rd.Header().Unavailable)
	rep.MonoToWallNs, rep.WindowNs = end.MonoToWallNs, end.WindowNs
	rep.SetDiskCaches(end.DiskCaches) // the capturing machine's, not this one's
	rep.SetJournals(end.Journals)
	rep.DroppedEnters, rep.DroppedPartials = p.Overflow()
	if !ok {
		rep.LossCut = analysis.LossNoEndLine
	}
	if output == "json" {
		if err := render.SummaryJSON(w, &rep); err != nil {
			return err
		}
	} else if err := render.FsyncReport(w, &rep); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := replayDecodeErrors(name, p.DecodeErrors()); err != nil {
		return err
	}
	return checkBudget(failOverBudget, rep)
}

func replayPeers(rd *capture.Reader, name, output string) error {
	pr, end, decodeErrs, err := assemblePeerCapture(rd, name)
	if err != nil {
		return err
	}
	rep, err := peersCaptureReport(pr, end, rd.Header().Port, name)
	if err != nil {
		return err
	}
	if output == "json" {
		enc := json.NewEncoder(render.JSONText(peersStdout))
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
		peersEtcdErrors(&rep)
		return replayDecodeErrors(name, decodeErrs)
	}
	render.Peers(peersStdout, &rep)
	peersEtcdErrors(&rep)
	if end.Etcd == nil && len(end.Members) > 0 {
		// A run with the member list may have compared etcd's metric: a
		// capture made before the capture carried the scrapes did not keep it.
		fmt.Fprintln(peersStdout, render.PeersMetricNotCaptured())
	}
	return replayDecodeErrors(name, decodeErrs)
}

// peersCaptureReport is the report of a replayed peers capture (pr, its
// end line end) as the live run made it: links, members, the etcd metric
// comparison and the slow peers.
func peersCaptureReport(pr peers.Report, end capture.End, port int, name string) (etcdmetric.PeersReport, error) {
	// pr.Events: the kernel's events, not the owner events among them.
	rep := etcdmetric.PeersReport{Port: port, WindowSeconds: time.Duration(end.WindowNs).Seconds(), Events: pr.Events, LostEvents: end.LostEvents, MissedEvents: end.MissedEvents}
	rep.Links, rep.Unassembled, rep.FoldedEarly, rep.Members, rep.MembersError = pr.Links, pr.Unassembled, pr.FoldedEarly, end.Members, end.MembersError
	if rep.MembersError == "" && len(rep.Members) > 0 {
		rep.FarLeader = etcdmetric.FindFarLeader(rep.Members, rep.Links)
	}
	rep.FillNotMember()
	if err := pipeline.CompareEtcdEvidence(&rep, end.Etcd, time.Duration(end.WindowNs)); err != nil {
		return rep, usagef("%s: its etcd metric scrapes: %v: give the capture as etcdscope peers --capture wrote it", name, err)
	}
	return rep, nil
}

// assemblePeerCapture replays a peers capture into its connections, the
// one path of `report peers.cap` and `report --html --peers peers.cap`:
// the report over the capture's window, its end line and the lines that
// did not decode. A capture without its end line is bad input.
func assemblePeerCapture(rd *capture.Reader, name string) (peers.Report, capture.End, uint64, error) {
	// Folded into connections as they come, as `etcdscope peers` does
	// live: the capture's events are not held.
	var conns pipeline.PeerConns
	p := pipeline.NewPeers(pipeline.PeersConfig{Sinks: []pipeline.PeerSink{&conns}})
	if err := p.Run(pipeline.PeerReadFunc(rd.ReadPeer)); err != nil {
		return peers.Report{}, capture.End{}, 0, fmt.Errorf("replaying %s: %w", name, err)
	}
	end, ok := rd.End()
	if !ok {
		cut := ""
		if n := p.DecodeErrors(); n > 0 {
			cut = fmt.Sprintf(", and %d line(s) could not be decoded (a capture cut short ends in a partial line: copy it whole)", n)
		}
		return peers.Report{}, end, 0, usagef("%s has no end line (the run was cut short?): its window and lost events are unknown%s", name, cut)
	}
	// What the live run left out (etcdscope's own probe connections),
	// the replay leaves out too.
	var own map[netip.AddrPort]bool
	for _, a := range end.OwnConns {
		if own == nil {
			own = map[netip.AddrPort]bool{}
		}
		own[a] = true
	}
	return conns.Report(peers.Options{Window: time.Duration(end.WindowNs), ExcludeLocal: own}), end, p.DecodeErrors(), nil
}

// writeHTMLReport renders the page (package report) to out, with the peers
// recording and the merge output if given.
func writeHTMLReport(out, name, peersPath, mergePath string, calls *report.CallSample, page *analysis.Report, sum analysis.Report) error {
	in := report.Input{Title: filepath.Base(name), Summary: sum, Report: page, Calls: calls}
	if mergePath != "" {
		f, err := safefile.OpenInput(mergePath)
		if err != nil {
			return usagef("--merge: %v: give the output of etcdscope merge --output json", err)
		}
		in.Merged, in.MergedCounts, err = report.ReadMerged(f)
		f.Close()
		if err != nil {
			return usagef("--merge %s: %v", mergePath, err)
		}
		if len(in.Merged) == 0 {
			return usagef("--merge %s has no merged_fsync records (give the output of etcdscope merge --output json)", mergePath)
		}
	}
	var peersErr error // a capture's lines that did not decode: exit 2 after the page
	if peersPath != "" {
		f, err := safefile.OpenInput(peersPath)
		if err != nil {
			return usagef("--peers: %v: give a file from etcdscope peers --record or --capture", err)
		}
		br := bufio.NewReaderSize(f, 1<<20)
		if isCapture(br) {
			peersErr, err = peerCaptureSection(&in, br, peersPath)
			f.Close()
			if err != nil {
				return err
			}
		} else {
			// Assembled as it streams (as `etcdscope peers` does live): the
			// connections are held, not the events.
			var a peers.Assembler
			metric, hdr, err := etcdmetric.ScanRecording(br, func(e *event.Peer) {
				in.PeerEvents++
				a.Add(e)
			})
			f.Close()
			if err != nil {
				return usagef("--peers %s: %v: give a file from etcdscope peers --record or --capture", peersPath, err)
			}
			if metric != nil {
				in.PeerMetric = metric.Comparisons
			}
			in.PeerMonoToWallNs = hdr.MonoToWallNs
			// What the live run left out (etcdscope's own probe connections)
			// the page leaves out too.
			rep := a.Report(peers.Options{ExcludeLocal: metric.ExcludeLocal()})
			in.PeerReport = &rep
		}
	}
	// Rendered into a temporary file renamed into place: a full disk or a
	// signal leaves no partial page, and no planted link is written through.
	f, err := safefile.Create(out, 0o644)
	if err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 64<<10)
	if err := report.Render(w, in); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	return errors.Join(f.Commit(), peersErr)
}

// peerCaptureSection replays a peers capture given to --peers (as
// `report peers.cap` does) into in's peers section. decodeErr: lines that
// did not decode, reported once the page is written (the replay's policy);
// err: no section.
func peerCaptureSection(in *report.Input, br *bufio.Reader, name string) (decodeErr, err error) {
	rd, err := capture.NewReader(br)
	if err != nil {
		return nil, usagef("--peers %s: %v", name, err)
	}
	if t := rd.Header().Tracer; t != capture.TracerPeers {
		return nil, usagef("--peers %s is a %s capture: give a capture of etcdscope peers --capture, or its --record file", name, t)
	}
	pr, end, decodeErrs, err := assemblePeerCapture(rd, name)
	if err != nil {
		return nil, err
	}
	rep, err := peersCaptureReport(pr, end, rd.Header().Port, name)
	if err != nil {
		return nil, err
	}
	in.PeerEvents, in.PeerReport, in.PeerNotMember, in.PeerMonoToWallNs = pr.Events, &pr, rep.NotMemberLinks, end.MonoToWallNs
	in.PeerMetric = render.WordComparisons(rep.Metric) // what etcd measured, drawn beside the model as from a recording
	return replayDecodeErrors(name, decodeErrs), nil
}
