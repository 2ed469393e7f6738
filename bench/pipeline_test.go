//go:build bench

// Package bench holds make bench's in-process harness: etcdscope fsync's
// event loop (tracer.FsyncTracer → analysis.Attributor → path → report,
// interval line and AppendJSON),
// rebuilt here because cmd/ keeps it unexported, so `go test -cpuprofile`
// shows where userspace time goes at a given fsync rate. It is behind the
// bench build tag: `make test` never runs it.
//
//	go test -tags bench -run TestPipeline -cpuprofile cpu.prof ./bench/ -args -rate 10000
package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/internal/testenv"
	"github.com/etcdscope/etcdscope/tracer"
)

var (
	rate    = flag.Float64("rate", 10000, "fdatasync calls per second fsyncgen makes")
	seconds = flag.Float64("seconds", 5, "how long fsyncgen runs")
)

// TestPipeline traces an fsyncgen process at -rate for -seconds with the
// same loop as etcdscope fsync --output json, and checks that every call
// fsyncgen made was attributed (its own count is the oracle).
func TestPipeline(t *testing.T) {
	testenv.RequireRoot(t)
	// A comm of its own: other fsyncgen runs on a shared machine (make
	// bench, other engineers' benchmarks) would otherwise be traced too.
	const comm = "fsyncgen-pipe"
	gen := filepath.Join(t.TempDir(), comm)
	if b, err := exec.Command("go", "build", "-o", gen, "./fsyncgen").CombinedOutput(); err != nil {
		t.Fatalf("building fsyncgen: %v: %s", err, b)
	}
	tr, err := tracer.NewFsync(tracer.FsyncConfig{Comm: comm})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()

	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	var startCPU syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &startCPU)
	go func() {
		n, err := loop(tr)
		done <- result{n, err}
	}()

	cmd := exec.Command(gen, "-dir", "/dev/shm", "-threads", "2", "-rate", strconv.FormatFloat(*rate, 'f', -1, 64),
		"-duration", time.Duration(*seconds*float64(time.Second)).String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("fsyncgen: %v", err)
	}
	var g struct {
		Fsyncs  float64 `json:"fsyncs"`
		Seconds float64 `json:"seconds"`
	}
	if err := json.Unmarshal(out, &g); err != nil {
		t.Fatalf("fsyncgen printed %q: %v", out, err)
	}
	if err := tr.Drain(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	var endCPU syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &endCPU)
	if r.err != nil {
		t.Fatal(r.err)
	}
	user := time.Duration(endCPU.Utime.Nano() - startCPU.Utime.Nano())
	sys := time.Duration(endCPU.Stime.Nano() - startCPU.Stime.Nano())
	cpu := user + sys
	lost, _ := tr.Lost()
	t.Logf("fsyncgen made %.0f fdatasync calls in %.2f s; the loop attributed %d; lost %d, missed %d; process CPU %v (%.1f%% of a core; user %v, system %v; %.2f µs per fsync)",
		g.Fsyncs, g.Seconds, r.n, lost, tr.Missed(), cpu, 100*cpu.Seconds()/g.Seconds, user, sys, cpu.Seconds()*1e6/max(g.Fsyncs, 1))
	if int64(r.n) != int64(g.Fsyncs) {
		t.Errorf("attributed %d fsyncs, fsyncgen made %.0f (lost %d)", r.n, g.Fsyncs, lost)
	}
}

// loop is cmd/etcdscope's eventLoop for --output json with the default
// --interval: attribute every fsync, name its file, count it in the report
// and the interval line (under the lock the interval printer shares),
// append its JSON line to a buffered writer.
func loop(tr *tracer.FsyncTracer) (int, error) {
	devs := host.NewDeviceResolver()
	paths := host.NewPathResolver()
	attr := analysis.NewAttributor(func(d event.Dev) (string, []event.Dev) {
		info := devs.Resolve(d)
		return info.Name, info.Disks
	})
	var mu sync.Mutex
	report := analysis.NewReportBuilder()
	var interval analysis.IntervalBuilder
	w := bufio.NewWriterSize(io.Discard, 64<<10)
	var buf []byte
	n := 0
	var ev event.Any
	for {
		if err := tr.Read(&ev); err != nil {
			if errors.Is(err, tracer.ErrClosed) || errors.Is(err, tracer.ErrDrained) {
				if rep := report.Report(0, 0, nil); rep.Fsyncs != int64(n) {
					return n, fmt.Errorf("report counted %d fsyncs, the loop %d", rep.Fsyncs, n)
				}
				return n, w.Flush()
			}
			return n, err
		}
		if ev.Kind != event.KindFsync {
			attr.AddEvent(&ev)
			continue
		}
		rec := attr.Attribute(ev.Fsync)
		rec.Path = paths.Path(&ev.Fsync)
		rec.FileKind = analysis.FileKind(rec.Path)
		n++
		mu.Lock()
		report.Add(&rec)
		interval.Add(&rec)
		mu.Unlock()
		buf = append(rec.AppendJSON(buf[:0]), '\n')
		if _, err := w.Write(buf); err != nil {
			return n, err
		}
	}
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(m.Run())
}
