//go:build bench

// Package bench holds make bench's in-process harness: etcdscope fsync's
// data path (package pipeline: tracer.FsyncTracer → analysis.Attributor →
// names → the report and interval sink and the JSON Lines sink), run in a
// test so that `go test -cpuprofile` shows where userspace time goes at a
// given fsync rate. It is behind the
// bench build tag: `make test` never runs it.
//
//	go test -tags bench -run TestPipeline -cpuprofile cpu.prof ./bench/ -args -rate 10000
package bench

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/internal/testenv"
	"github.com/etcdscope/etcdscope/pipeline"
	"github.com/etcdscope/etcdscope/render"
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

// loop runs the pipeline as etcdscope fsync --output json does with the
// default --interval: the report and interval sink, and the JSON Lines
// sink (into io.Discard); it returns how many records the sinks got.
func loop(tr *tracer.FsyncTracer) (int, error) {
	rs := pipeline.NewReportSink(true)
	lines := render.NewJSONLines(io.Discard, 0)
	p := pipeline.NewFsyncLoop(pipeline.FsyncLoopConfig{Sinks: []pipeline.FsyncSink{rs, lines}})
	err := p.Run(tr)
	if cerr := lines.Close(); err == nil {
		err = cerr
	}
	n := int(p.Records())
	if err != nil {
		return n, err
	}
	if rep := rs.Report(0, 0, nil); rep.Fsyncs != int64(n) {
		return n, fmt.Errorf("report counted %d fsyncs, the pipeline %d", rep.Fsyncs, n)
	}
	if d := p.DecodeErrors(); d > 0 {
		return n, fmt.Errorf("%d records not decoded", d)
	}
	return n, nil
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(m.Run())
}
