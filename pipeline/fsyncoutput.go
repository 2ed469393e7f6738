package pipeline

import (
	"fmt"
	"io"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/stats"
	"github.com/etcdscope/etcdscope/capture"
	"github.com/etcdscope/etcdscope/render"
)

// FsyncOutputConfig says where a live `etcdscope fsync` run writes.
type FsyncOutputConfig struct {
	// Stdout takes the report (or the JSON Lines and their summary);
	// Stderr the interval and workload lines when Stdout is JSON.
	Stdout, Stderr io.Writer
	JSON           bool          // --output json
	Interval       bool          // an interval line every tick (--interval > 0)
	MinLatency     time.Duration // with JSON: the records printed are at least this slow
	// CapturePath, if set, is the capture to write (--capture), with
	// CaptureHeader its header.
	CapturePath   string
	CaptureHeader capture.Header
}

// FsyncOutput is what a live `etcdscope fsync` run writes: the sinks of its
// FsyncLoop (the report's counts, the JSON Lines), the interval lines,
// the capture, and at the end the report table or JSON summary.
type FsyncOutput struct {
	out, info io.Writer // the report and records; the interval and workload lines
	json      bool
	interval  bool
	rs        *ReportSink
	lines     *render.JSONLines // with JSON
	capw      *CaptureFile      // with a capture, until finished
}

// NewFsyncOutput opens cfg's outputs (the capture file, when asked for).
func NewFsyncOutput(cfg FsyncOutputConfig) (*FsyncOutput, error) {
	o := &FsyncOutput{out: cfg.Stdout, info: cfg.Stdout, json: cfg.JSON, interval: cfg.Interval,
		rs: NewReportSink(cfg.Interval)}
	if o.json {
		o.info = cfg.Stderr
		o.out = render.JSONText(cfg.Stdout) // C1 controls escaped too
		o.lines = render.NewJSONLines(o.out, cfg.MinLatency)
	}
	if cfg.CapturePath != "" {
		var err error
		if o.capw, err = CreateCapture(cfg.CapturePath, cfg.CaptureHeader); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// Sinks are the loop's sinks (the capture is its own: Capture).
func (o *FsyncOutput) Sinks() []FsyncSink {
	if o.lines != nil {
		return []FsyncSink{o.rs, o.lines}
	}
	return []FsyncSink{o.rs}
}

// Capture is the capture's writer for FsyncLoopConfig.Capture (nil
// without one).
func (o *FsyncOutput) Capture() *capture.Writer {
	if o.capw == nil {
		return nil
	}
	return o.capw.Writer
}

// Abandon removes the capture of a run that failed before Report.
func (o *FsyncOutput) Abandon() {
	if o.capw != nil {
		o.capw.Abandon()
	}
}

// LossCounter is a source's loss counters (a tracer's).
type LossCounter interface {
	Lost() (uint64, error)
	Missed() uint64
}

// IntervalLine prints the calls and src's losses since the previous line.
func (o *FsyncOutput) IntervalLine(src LossCounter) {
	iv := o.rs.Interval()
	var l, m uint64
	lost, err := src.Lost()
	if err == nil {
		l, m = o.rs.IntervalLoss(lost, src.Missed())
	}
	fmt.Fprintln(o.info, render.IntervalRow(time.Now(), iv, l, m, err, false))
}

// CloseLines writes the last JSON records: a failure to is the run's,
// unless it already failed (runErr).
func (o *FsyncOutput) CloseLines(runErr error) error {
	if o.lines != nil {
		if err := o.lines.Close(); runErr == nil {
			return err
		}
	}
	return runErr
}

// Report builds the run's report from what the sinks counted, the
// tracer's st, the run's traced window and the loop p's counts, finishes
// the capture and prints the last interval line and the report.
func (o *FsyncOutput) Report(st Stats, window time.Duration, p *FsyncLoop, unavailable []analysis.Unavailable) (analysis.Report, error) {
	rep := o.rs.LiveReport(st, window, p, unavailable)
	if o.capw != nil {
		// The disks' write cache modes go with the capture, so that its
		// replay prints the live run's disk lines (this machine's sysfs
		// may not have the disk at replay).
		var disks []analysis.DiskCache
		for _, d := range rep.Disks {
			if d.WriteCache != "" {
				disks = append(disks, d)
			}
		}
		err := o.capw.Finish(capture.End{LostEvents: st.Lost, MissedEvents: st.Missed, DecodeErrors: p.DecodeErrors(), WindowNs: rep.WindowNs, MonoToWallNs: rep.MonoToWallNs, DiskCaches: disks, Journals: rep.Journals})
		o.capw = nil
		if err != nil {
			return rep, err
		}
	}
	if o.interval {
		// The calls since the last tick: without this line the interval
		// lines would not add up to the report's count.
		// Also when it only lost events: the lines' losses add up to the
		// report's.
		iv := o.rs.Interval()
		l, m := o.rs.IntervalLoss(st.Lost, st.Missed)
		if iv.Count > 0 || l > 0 || m > 0 {
			fmt.Fprintln(o.info, render.IntervalRow(time.Now(), iv, l, m, nil, true))
		}
	}
	if o.json {
		return rep, render.SummaryJSON(o.out, &rep)
	}
	fmt.Fprintln(o.out)
	return rep, render.FsyncReport(o.out, &rep)
}

// WorkloadEnd prints the built-in WAL workload's line after the report
// (nothing when it did not run) and returns its error.
func (o *FsyncOutput) WorkloadEnd(wl *WALWorkload) error {
	if !wl.Running() {
		return nil
	}
	s := stats.Summarize(wl.Latencies)
	fmt.Fprintf(o.info, "\n%s\n", render.WALWorkloadEnd(wl.Stats.Appends, wl.Stats.Segments, s.P50, s.P99))
	if wl.Err != nil {
		return fmt.Errorf("workload: %w", wl.Err)
	}
	return nil
}
