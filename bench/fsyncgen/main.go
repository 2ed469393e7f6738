// Command fsyncgen is make bench's synthetic fdatasync load: threads that
// each pwrite 2300 bytes (etcd's WAL entry size in fio's etcd job) and
// fdatasync their own file, at a paced total rate or as fast as they can.
// On tmpfs fdatasync does no I/O, so the rate is bounded by the CPU, and
// the time per call is the syscall plus whatever tracing adds to it.
//
// With -pingpong it makes no fsync: two threads pinned to CPU 0 pass a
// byte through two pipes, and it prints
// {"round_trips": N, "seconds": S, "ns_per_round_trip": T}.
//
// With -churn PORT it makes no fsync: -threads goroutines each connect to
// a listener of its own on 127.0.0.1:PORT, exchange a byte each way and
// close, at -rate connections a second in all (0: as fast as they go),
// and it prints {"conns": N, "seconds": S, "rate_per_s": R}: the peers
// tracer's load (each connection is an open, a setup and a close on both
// sides).
//
// With -getppid it makes no fsync either: one thread calls getppid(2) in
// a loop, and it prints {"calls": N, "seconds": S, "ns_per_call": T,
// "ns_mean": M} (T: the 10th percentile over chunks of 256 calls, robust
// to preemption; M: the plain mean): what a tracer costs every syscall of
// a task it does not trace.
//
// It prints one JSON object to stdout when done:
//
//	{"fsyncs": N, "seconds": S, "rate_per_s": R, "ns_per_fsync": T}
//
// ns_per_fsync is the mean wall time of one pwrite+fdatasync pair per
// thread (seconds × threads / fsyncs), meaningful for unpaced runs.
// Its comm is "fsyncgen" (the binary's name), what tracers filter on.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	dir := flag.String("dir", "/dev/shm", "directory for the files (tmpfs: no I/O)")
	threads := flag.Int("threads", 1, "writer threads, one file each")
	rate := flag.Float64("rate", 0, "total fdatasync calls per second (0: unpaced)")
	dur := flag.Duration("duration", 2*time.Second, "how long to run")
	pingpong := flag.Bool("pingpong", false, "instead: two threads on CPU 0 pass a byte back and forth through pipes (two context switches a round trip, no fsync): the tax a tracer puts on unrelated tasks' switches")
	churn := flag.Int("churn", 0, "instead: open, use and close TCP connections on 127.0.0.1 to and from this port as fast as -threads goroutines go (or -rate connections/s): the peers tracer's load")
	getppid := flag.Bool("getppid", false, "instead: call getppid(2) in a loop on one thread (no fsync): the tax a tracer's syscall tracepoints put on every syscall of every task")
	flag.Parse()
	if *getppid {
		getppidLoop(*dur)
		return
	}
	if *churn != 0 {
		if err := churnConns(*churn, *threads, *rate, *dur); err != nil {
			fmt.Fprintln(os.Stderr, "fsyncgen:", err)
			os.Exit(1)
		}
		return
	}
	if *pingpong {
		if err := pingPong(*dur); err != nil {
			fmt.Fprintln(os.Stderr, "fsyncgen:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*dir, *threads, *rate, *dur); err != nil {
		fmt.Fprintln(os.Stderr, "fsyncgen:", err)
		os.Exit(1)
	}
}

func run(dir string, threads int, rate float64, dur time.Duration) error {
	if threads < 1 {
		return fmt.Errorf("-threads %d: need at least 1", threads)
	}
	files := make([]*os.File, threads)
	for i := range files {
		f, err := os.CreateTemp(dir, "fsyncgen-*")
		if err != nil {
			return fmt.Errorf("creating file: %w", err)
		}
		defer os.Remove(f.Name())
		defer f.Close()
		files[i] = f
	}
	var total atomic.Int64
	errs := make(chan error, threads)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(dur)
	perThread := rate / float64(threads)
	for _, f := range files {
		wg.Add(1)
		go func(fd int) {
			defer wg.Done()
			// One OS thread per writer: a tid the tracers see as one thread.
			runtime.LockOSThread()
			buf := make([]byte, 2300)
			var n, off int64
			for {
				now := time.Now()
				if now.After(deadline) {
					break
				}
				// Paced: catch up to the schedule in a burst, then sleep;
				// Go's timers cannot sleep per call at 100k calls/s.
				due := int64(1 << 62)
				if perThread > 0 {
					due = int64(now.Sub(start).Seconds() * perThread)
				}
				batch := 0
				// The deadline is looked at every 64 calls too: on a
				// disk 4096 unpaced calls can take seconds.
				for n < due && batch < 4096 && (batch%64 != 0 || batch == 0 || time.Now().Before(deadline)) {
					if _, err := unix.Pwrite(fd, buf, off); err != nil {
						errs <- fmt.Errorf("pwrite: %w", err)
						return
					}
					if err := unix.Fdatasync(fd); err != nil {
						errs <- fmt.Errorf("fdatasync: %w", err)
						return
					}
					n++
					batch++
					if off += int64(len(buf)); off > 64<<20 {
						off = 0
					}
				}
				if perThread > 0 && batch == 0 {
					time.Sleep(200 * time.Microsecond)
				}
			}
			total.Add(n)
		}(int(f.Fd()))
	}
	out, err := rateResult(&wg, errs, &total, start, "fsyncs")
	if err != nil {
		return err
	}
	n := total.Load()
	if n > 0 {
		out["ns_per_fsync"] = out["seconds"] * 1e9 * float64(threads) / float64(n)
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// pingPong passes a byte between two threads pinned to CPU 0 through two
// pipes for d: each round trip is two context switches.
func pingPong(d time.Duration) error {
	var ab, ba [2]int
	if err := unix.Pipe(ab[:]); err != nil {
		return err
	}
	if err := unix.Pipe(ba[:]); err != nil {
		return err
	}
	for _, fd := range []int{ab[0], ba[0], ba[1]} { // ab[1] is closed to end the echo
		defer unix.Close(fd)
	}
	pin := func() error {
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(0)
		return unix.SchedSetaffinity(0, &set)
	}
	errs := make(chan error, 1)
	go func() { // the echo side; ends when the other closes its pipe
		if err := pin(); err != nil {
			errs <- err
			return
		}
		b := make([]byte, 1)
		for {
			if n, err := unix.Read(ab[0], b); err != nil || n == 0 {
				errs <- err
				return
			}
			if _, err := unix.Write(ba[1], b); err != nil {
				errs <- err
				return
			}
		}
	}()
	if err := pin(); err != nil {
		return err
	}
	b := []byte{1}
	var n int64
	start := time.Now()
	deadline := start.Add(d)
	for ; n&1023 != 0 || time.Now().Before(deadline); n++ {
		if _, err := unix.Write(ab[1], b); err != nil {
			return err
		}
		if _, err := unix.Read(ba[0], b); err != nil {
			return err
		}
	}
	secs := time.Since(start).Seconds()
	unix.Close(ab[1])
	if err := <-errs; err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]float64{"round_trips": float64(n), "seconds": secs, "ns_per_round_trip": secs * 1e9 / float64(n)})
}

// getppidLoop calls getppid(2) for d on one OS thread, straight through
// the raw syscall (no Go scheduler hand-off per call), in chunks of 256
// calls, and prints the mean time per call over the run and the 10th
// percentile of the chunks' times per call: on a shared machine a chunk
// the thread spent preempted reads long, and the low percentile is what a
// call costs when it runs (ns_per_call; ns_mean is the plain mean).
func getppidLoop(d time.Duration) {
	runtime.LockOSThread()
	const chunk = 256
	var n int64
	var per []float64
	start := time.Now()
	deadline := start.Add(d)
	for t0 := start; t0.Before(deadline); {
		for i := 0; i < chunk; i++ {
			unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
		}
		n += chunk
		t1 := time.Now()
		per = append(per, float64(t1.Sub(t0).Nanoseconds())/chunk)
		t0 = t1
	}
	secs := time.Since(start).Seconds()
	slices.Sort(per)
	json.NewEncoder(os.Stdout).Encode(map[string]float64{"calls": float64(n), "seconds": secs,
		"ns_per_call": per[len(per)/10], "ns_mean": secs * 1e9 / float64(n)})
}

// churnConns opens, uses and closes TCP connections to 127.0.0.1:port for
// d from threads goroutines, paced to rate connections a second in all
// (0: unpaced).
// churnMaxDebt bounds how far a paced churn goroutine catches up after a
// stall (the machine did not run it): at most this long's worth of its
// rate in a burst, the rest forgiven. Unbounded, a stall of a second is
// followed by a burst at up to the machine's full speed as every goroutine
// makes up its debt at once: a load above -rate, which the starved-reader
// tests (e2e/starved_test.go) make no claim about. The printed rate_per_s
// is what was made, so a forgiven debt shows as a lower rate.
const churnMaxDebt = 20 * time.Millisecond

func churnConns(port, threads int, rate float64, d time.Duration) error {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b := make([]byte, 1)
				if _, err := c.Read(b); err == nil {
					c.Write(b)
				}
			}()
		}
	}()
	var total atomic.Int64
	errs := make(chan error, threads)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	per := rate / float64(max(threads, 1))
	for i := 0; i < max(threads, 1); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := []byte{1}
			var n int64
			var forgiven float64 // connections of a stall's debt not made up
			for now := time.Now(); now.Before(deadline); now = time.Now() {
				if per > 0 {
					due := now.Sub(start).Seconds()*per - forgiven
					if debt := due - float64(n); debt > per*churnMaxDebt.Seconds() {
						forgiven += debt - per*churnMaxDebt.Seconds()
						due = float64(n) + per*churnMaxDebt.Seconds()
					}
					if float64(n) >= due {
						time.Sleep(time.Millisecond)
						continue
					}
				}
				c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
				if err != nil {
					errs <- err
					return
				}
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := c.Write(b); err == nil {
					c.Read(b)
				}
				c.Close()
				n++
			}
			total.Add(n)
		}()
	}
	out, err := rateResult(&wg, errs, &total, start, "conns")
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// rateResult waits for the workers, returns the first error one sent, or
// else {what: N, "seconds": S, "rate_per_s": N/S} from their total.
func rateResult(wg *sync.WaitGroup, errs chan error, total *atomic.Int64, start time.Time, what string) (map[string]float64, error) {
	wg.Wait()
	secs := time.Since(start).Seconds()
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	n := float64(total.Load())
	return map[string]float64{what: n, "seconds": secs, "rate_per_s": n / secs}, nil
}
