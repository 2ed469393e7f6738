package pipeline

import (
	"sync"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/host"
)

// ReportSink is the sink of `etcdscope fsync` and `report`: it counts every
// record in the end-of-run report (analysis.ReportBuilder) and, when
// asked to, in the current interval of the live line. Safe for concurrent
// use: the pipeline adds while the CLI's ticker reads the interval.
type ReportSink struct {
	mu       sync.Mutex
	report   *analysis.ReportBuilder
	interval *analysis.IntervalBuilder // nil: no interval lines
}

// NewReportSink returns an empty sink; interval turns the interval
// accumulator on.
func NewReportSink(interval bool) *ReportSink {
	s := &ReportSink{report: analysis.NewReportBuilder()}
	if interval {
		s.interval = &analysis.IntervalBuilder{}
	}
	return s
}

// Fsync counts rec.
func (s *ReportSink) Fsync(rec *analysis.FsyncRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.report.Add(rec)
	if s.interval != nil {
		s.interval.Add(rec)
	}
	return nil
}

// Write counts a write record in the end-of-run report (not in the live
// line, which is about fsyncs).
func (s *ReportSink) Write(rec *analysis.WriteRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.report.AddWrite(rec)
	return nil
}

// Interval returns the calls since the last Interval
// (analysis.IntervalBuilder.Summary) and starts the next; the zero
// Interval without interval lines.
func (s *ReportSink) Interval() analysis.Interval {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.interval == nil {
		return analysis.Interval{}
	}
	return s.interval.Summary()
}

// IntervalLoss returns what the tracer's running totals of lost events
// and missed probe runs grew by since the previous call
// (analysis.IntervalBuilder.Loss), so each live line shows its own
// interval's loss, not a total that only grows. 0, 0 without interval
// lines.
func (s *ReportSink) IntervalLoss(lostTotal, missedTotal uint64) (lost, missed uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.interval == nil {
		return 0, 0
	}
	return s.interval.Loss(lostTotal, missedTotal)
}

// SetMissedPrograms says which programs the missed runs were of
// (analysis.ReportBuilder.SetMissedPrograms).
func (s *ReportSink) SetMissedPrograms(progs []analysis.MissedRuns) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.report.SetMissedPrograms(progs)
}

// Report returns the report of every record so far (analysis.ReportBuilder.Report).
func (s *ReportSink) Report(lost, missed uint64, unavailable []analysis.Unavailable) analysis.Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.report.Report(lost, missed, unavailable)
}

// LiveReport is the report of a live fsync run at its end: every record
// so far with the tracer's counters st and the loop p's (its dropped
// enters and partials), the run's traced window (Session.Window), the
// clock offset, and the disks' write caches and ext4 journals read from
// this machine (LiveDiskCaches, LiveJournals).
func (s *ReportSink) LiveReport(st Stats, window time.Duration, p *FsyncLoop, unavailable []analysis.Unavailable) analysis.Report {
	s.SetMissedPrograms(st.MissedPrograms)
	rep := s.Report(st.Lost, st.Missed, unavailable)
	rep.WindowNs = int64(window)
	rep.DroppedEnters, rep.DroppedPartials = p.Overflow()
	rep.Unpartitioned = st.Unpartitioned
	rep.MonoToWallNs = host.MonoToWallNs()
	rep.RingPeakBytes = st.RingPeakBytes
	LiveDiskCaches(&rep)
	LiveJournals(&rep)
	return rep
}
