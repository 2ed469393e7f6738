package render

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
)

// JSONLinesFlushEvery bounds how long a record waits in JSONLines' buffer:
// one write(2) per record cost more than encoding it (docs/performance.md).
const JSONLinesFlushEvery = 100 * time.Millisecond

// JSONLines writes fsync records as JSON Lines (docs/schema.md, type
// "fsync") through a buffer that a timer flushes, so a reader tailing the
// output sees each record within JSONLinesFlushEvery while a busy loop
// makes one write per 64 KiB. The timer is armed only while something is
// buffered: a ticker woke an idle tracer 10 times a second, ~0.17% of a
// core here, a sixth of issue 12's 1% budget. It is a pipeline sink
// (Fsync, Write).
type JSONLines struct {
	minNs int64
	mu    sync.Mutex
	w     *bufio.Writer
	buf   []byte
	enc   analysis.FsyncEncoder // under mu
	err   error                 // the first write error, from either goroutine
	// timer flushes the buffer JSONLinesFlushEvery after armed was set
	// (nil until the first record); armed: it will fire. Whenever the
	// buffer holds bytes, armed is true, so none waits longer.
	timer  *time.Timer
	armed  bool
	closed bool
	// timerFlushes counts the timer's runs (under mu; for tests).
	timerFlushes int
}

// NewJSONLines returns a sink writing to out; records faster than
// minLatency are not written (fsync --min-latency). Close flushes it.
func NewJSONLines(out io.Writer, minLatency time.Duration) *JSONLines {
	return &JSONLines{minNs: int64(minLatency), w: bufio.NewWriterSize(out, 64<<10)}
}

// flushLater flushes what the timer armed it for (and anything written
// since): every byte it finds waited at most JSONLinesFlushEvery.
func (l *JSONLines) flushLater() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed = false
	l.timerFlushes++
	if !l.closed && l.err == nil && l.w.Buffered() > 0 {
		l.err = l.w.Flush()
	}
}

// Fsync appends one record and its newline.
func (l *JSONLines) Fsync(rec *analysis.FsyncRecord) error {
	if rec.TotalNs < l.minNs {
		return nil
	}
	return l.put(func(buf []byte) []byte { return l.enc.Append(buf, rec) })
}

// put writes the line that appendJSON appends to a buffer, and its
// newline.
func (l *JSONLines) put(appendJSON func([]byte) []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	l.buf = append(appendJSON(l.buf[:0]), '\n')
	before := l.w.Buffered()
	_, l.err = l.w.Write(l.buf)
	if l.err != nil {
		return l.err
	}
	switch n := l.w.Buffered(); {
	case n > 0 && !l.armed:
		l.armed = true
		if l.timer == nil {
			l.timer = time.AfterFunc(JSONLinesFlushEvery, l.flushLater)
		} else {
			l.timer.Reset(JSONLinesFlushEvery)
		}
	case n > 0 && n < before+len(l.buf):
		// The full buffer was written out: what it holds now is the end
		// of this line, so the wait starts again. Moving the timer back
		// keeps it from firing while lines come faster than a buffer a
		// JSONLinesFlushEvery (10k fsync/s: a write every ~13 ms), each
		// firing a goroutine and a thread's wake-up. A run the timer
		// already started flushes early, which is harmless.
		l.timer.Reset(JSONLinesFlushEvery)
	}
	return nil
}

// Write appends one write record (type "write") and its newline, with
// the same --min-latency filter. encoding/json: writes are traced only
// on request (fsync --writes), so they have no hand-made encoder.
func (l *JSONLines) Write(rec *analysis.WriteRecord) error {
	if rec.TotalNs < l.minNs {
		return nil
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return l.put(func(buf []byte) []byte { return append(buf, b...) })
}

// Close stops the timer and flushes what is buffered; it returns the first
// write error.
func (l *JSONLines) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
	}
	if l.err == nil {
		l.err = l.w.Flush()
	}
	return l.err
}

// SummaryJSON writes the end-of-run summary (docs/schema.md, type
// "summary") and its newline as json.Encoder writes analysis.Report, with
// each group's disk_verdict given its text (DiskVerdictText): analysis
// returns the verdict's numbers, the words are the sinks'.
func SummaryJSON(w io.Writer, r *analysis.Report) error {
	var groups []summaryGroup // null when r's are (a summary read back without groups)
	if r.Groups != nil {
		groups = make([]summaryGroup, len(r.Groups))
	}
	for i := range r.Groups {
		g := &r.Groups[i]
		groups[i] = summaryGroup{Group: *g, DiskWhy: DiskWhyText(g.DiskWhy)}
		if g.Disk != nil {
			groups[i].Disk = &summaryDisk{DiskVerdict: *g.Disk, Text: DiskVerdictText(g.Disk)}
		}
	}
	gs, err := json.Marshal(groups)
	if err != nil {
		return err
	}
	bare := *r
	bare.Groups, bare.LossUnknown = nil, LossUnknown(r)
	b, err := json.Marshal(&bare)
	if err != nil {
		return err
	}
	// The one "groups":null is the report's own key: inside a JSON string
	// every quote is escaped.
	b = bytes.Replace(b, []byte(`"groups":null`), append([]byte(`"groups":`), gs...), 1)
	_, err = w.Write(append(b, '\n'))
	return err
}

// summaryGroup is analysis.Group with its disk verdict's text. Disk and
// DiskWhy are Group's last two fields, so declaring them again here keeps
// the JSON's field order (TestSummaryJSONFieldOrder).
type summaryGroup struct {
	analysis.Group
	Disk    *summaryDisk `json:"disk_verdict,omitempty"`
	DiskWhy string       `json:"disk_verdict_why,omitempty"`
}

// summaryDisk is analysis.DiskVerdict and the sentence the table prints.
type summaryDisk struct {
	analysis.DiskVerdict
	Text string `json:"text"`
}

// LossUnknown words why r's loss counts are not known (analysis.LossCut),
// as the table and the JSON summary's loss_unknown say it; a summary read
// back keeps its own words; "" when they are known.
func LossUnknown(r *analysis.Report) string {
	switch r.LossCut {
	case analysis.LossNoSummary:
		return "unknown: recording has no summary (the run was cut short)"
	case analysis.LossNoEndLine:
		return "unknown: the capture has no end line (the run was cut short)"
	}
	return r.LossUnknown
}
