// Command commitsat measures what `etcdscope commit` costs a saturated
// etcd (issue 27): one member of bin/etcd (or three: -members 3), the load of `etcdctl check perf
// --load l` (500 clients, at most 8000 puts/s, 256-byte keys, 1 KiB
// values: etcdctl/ctlv3/command/check.go v3.6.16; -load m: 200 clients,
// 1000 puts/s) for -duration, untraced
// and with etcdscope commit attached (every write; every firing sent and
// joined in Go, --raw-events; 1 write in -sample), or `etcdscope serve
// --pid P --commit-pid P` beside the leader or a follower (serve-leader,
// serve-follower: the DaemonSet's agent; issue 28), interleaved, -rounds
// rounds. The load goes to the leader. For each run it prints the puts per
// second, etcd's CPU per put (/proc/PID/stat utime+stime: the uprobe traps
// are charged to etcd) on the leader and, with three members, on the
// follower serve-follower traces, etcdscope's CPU per put and the puts'
// client-side p50/p99/max, and at the end each variant's median and range
// over the rounds. serve-leader-duty and serve-follower-duty add
// `--commit-duty -duty` (the probes attached ON of every PERIOD: give a
// -duration that is a whole number of PERIODs, so that every run holds
// the same attached time whatever its phase); serve-leader-fsync and
// serve-follower-fsync are `serve --pid P` without --commit-pid (the
// fsync and peers tracers alone: the agent's cost without the commit
// tracer). Run as root from the repository: go run ./bench/commitsat.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Member i listens for clients on clientPort+i and for peers on peerPort+i.
const (
	clientPort = 23791
	peerPort   = 23801
)

// serveListen is where a serve variant's agent listens (loopback).
const serveListen = "127.0.0.1:23811"

// loads are check perf's: clients and the puts per second they may make.
var loads = map[string]struct{ clients, limit int }{"m": {200, 1000}, "l": {500, 8000}}

// clients and limit: the load's (-load); members: the cluster's size (-members).
var clients, limit, members int

// duty is the -duty variants' --commit-duty (-duty).
var duty string

// run is one variant's run in one round.
type run struct {
	variant                  string
	puts                     int
	errs                     int
	seconds                  float64
	etcdCPUSec, tracerCPUSec float64
	followerCPUSec           float64 // the traced-by-serve-follower member's, with three members
	p50, p99, max            time.Duration
	loadavg                  string // 1-minute load average at the run's start
	// seen and attachedSec: a serve variant's etcdscope_commit_writes_seen_total
	// and _attached_seconds_total at the run's end (since serve started).
	seen, attachedSec float64
}

func main() {
	etcdBin := flag.String("etcd", "bin/etcd", "etcd binary")
	es := flag.String("etcdscope", "bin/etcdscope", "etcdscope binary")
	rounds := flag.Int("rounds", 3, "rounds (each runs every variant once)")
	dur := flag.Duration("duration", 30*time.Second, "load per run")
	sample := flag.Int("sample", 10, "the sampled variant follows 1 write in this many")
	flag.StringVar(&duty, "duty", "2s/20s", "the -duty variants' serve --commit-duty ON/PERIOD")
	vs := flag.String("variants", "untraced,commit-raw,commit,commit-sample", "comma-separated: untraced (keep it), commit, commit-raw (--raw-events), commit-nogrpc (--grpc=false), commit-sample (--sample -sample), commit-nogrpc-sample, serve-leader, serve-follower (serve --pid P --commit-pid P; -members 3), serve-leader-sample, serve-follower-sample (--commit-sample -sample), serve-leader-duty, serve-follower-duty (--commit-duty -duty), serve-leader-fsync, serve-follower-fsync (serve --pid P, no --commit-pid)")
	ld := flag.String("load", "l", "check perf's load: l (500 clients, 8000 puts/s at most) or m (200, 1000)")
	flag.IntVar(&members, "members", 1, "etcd members: 1 or 3 (the load goes to the leader; serve-follower traces a follower)")
	flag.Parse()
	if members != 1 && members != 3 {
		fmt.Fprintln(os.Stderr, "commitsat: -members 1 or 3")
		os.Exit(2)
	}
	l, ok := loads[*ld]
	if !ok {
		fmt.Fprintln(os.Stderr, "commitsat: -load l or m")
		os.Exit(2)
	}
	clients, limit = l.clients, l.limit
	if members == 1 && strings.Contains(*vs, "serve-follower") {
		fmt.Fprintln(os.Stderr, "commitsat: serve-follower needs -members 3")
		os.Exit(2)
	}
	if err := mainErr(*etcdBin, *es, *rounds, *dur, *sample, strings.Split(*vs, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "commitsat:", err)
		os.Exit(1)
	}
}

func mainErr(etcdBin, es string, rounds int, dur time.Duration, sample int, variants []string) error {
	dir, err := os.MkdirTemp("/var/tmp", "etcdscope-commitsat-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var initial []string
	for i := range members {
		initial = append(initial, fmt.Sprintf("sat%d=http://127.0.0.1:%d", i, peerPort+i))
	}
	procs := make([]*exec.Cmd, members)
	for i := range procs {
		cl, peer := fmt.Sprintf("http://127.0.0.1:%d", clientPort+i), fmt.Sprintf("http://127.0.0.1:%d", peerPort+i)
		procs[i] = exec.Command(etcdBin, "--name", fmt.Sprintf("sat%d", i), "--data-dir", filepath.Join(dir, fmt.Sprintf("data%d", i)),
			"--listen-client-urls", cl, "--advertise-client-urls", cl,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","), "--log-level", "error", "--quota-backend-bytes", strconv.Itoa(8<<30))
		if err := procs[i].Start(); err != nil {
			return err
		}
		defer func() { procs[i].Process.Signal(os.Interrupt); procs[i].Wait() }()
	}
	leader, err := findLeader()
	if err != nil {
		return err
	}
	client := fmt.Sprintf("127.0.0.1:%d", clientPort+leader)
	cc := make([]*clientv3.Client, clients)
	for i := range cc {
		if cc[i], err = clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}); err != nil {
			return err
		}
		defer cc[i].Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	for {
		if _, err = cc[0].Put(ctx, "/commitsat/warmup", "x"); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	if err != nil {
		return fmt.Errorf("etcd not answering: %w", err)
	}
	pid := procs[leader].Process.Pid
	follower := 0 // the follower's pid, with three members
	if members > 1 {
		follower = procs[(leader+1)%members].Process.Pid
	}
	fmt.Printf("etcd %s, %d member(s), leader sat%d (pid %d)", etcdBin, members, leader, pid)
	if follower != 0 {
		fmt.Printf(", serve-follower's member sat%d (pid %d)", (leader+1)%members, follower)
	}
	fmt.Print("\n\n")
	// What etcdscope commit costs with no write at all (its rings' polls,
	// the Go runtime): the floor under its CPU per put.
	for _, v := range variants {
		if v == "untraced" {
			continue
		}
		tr, err := startTracer(es, dir, v, tracedPid(v, pid, follower), sample)
		if err != nil {
			return err
		}
		c0, _ := cpuSec(tr.Process.Pid)
		time.Sleep(10 * time.Second)
		c1, _ := cpuSec(tr.Process.Pid)
		tr.Process.Signal(os.Interrupt)
		tr.Wait()
		fmt.Printf("idle etcd, %s: %.2f %% of a core\n\n", v, (c1-c0)/10*100)
	}
	var runs []run
	fmt.Println("| round | variant | puts/s | etcd CPU µs/put | follower etcd CPU µs/put | etcdscope CPU µs/put | put p50 ms | put p99 ms | max ms | errors | load avg | serve: writes seen, attached s |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for r := range rounds {
		// Rotate the order each round so no variant always runs first.
		for i := range variants {
			v := variants[(i+r)%len(variants)]
			var tr *exec.Cmd
			if v != "untraced" {
				if tr, err = startTracer(es, dir, v, tracedPid(v, pid, follower), sample); err != nil {
					return err
				}
			}
			x := run{variant: v}
			la, _ := os.ReadFile("/proc/loadavg") // other jobs on the machine
			x.loadavg, _, _ = strings.Cut(string(la), " ")
			e0, _ := cpuSec(pid)
			f0, _ := cpuSec(follower)
			var t0 float64
			if tr != nil {
				t0, _ = cpuSec(tr.Process.Pid)
			}
			lats, errs, secs := load(cc, dur, fmt.Sprintf("/commitsat/%d/%s/", r, v))
			e1, _ := cpuSec(pid)
			f1, _ := cpuSec(follower)
			x.followerCPUSec = f1 - f0
			if tr != nil {
				t1, _ := cpuSec(tr.Process.Pid)
				x.tracerCPUSec = t1 - t0
				if strings.HasPrefix(v, "serve-") && !strings.HasSuffix(v, "-fsync") {
					x.seen, x.attachedSec = serveCounts()
				}
				tr.Process.Signal(os.Interrupt)
				tr.Wait()
			}
			x.puts, x.errs, x.seconds, x.etcdCPUSec = len(lats), errs, secs, e1-e0
			slices.Sort(lats)
			if n := len(lats); n > 0 {
				x.p50, x.p99, x.max = lats[n/2], lats[n*99/100], lats[n-1]
			}
			runs = append(runs, x)
			fmt.Printf("| %d | %s | %.0f | %.1f | %.1f | %.2f | %.2f | %.2f | %.1f | %d | %s | %s |\n", r+1, v, float64(x.puts)/x.seconds,
				x.etcdCPUSec*1e6/float64(x.puts), x.followerCPUSec*1e6/float64(x.puts), x.tracerCPUSec*1e6/float64(x.puts), ms(x.p50), ms(x.p99), ms(x.max), x.errs, x.loadavg, seenNote(x))
			// Delete the run's keys, compact, and let etcd settle.
			if resp, err := cc[0].Delete(context.Background(), fmt.Sprintf("/commitsat/%d/%s/", r, v), clientv3.WithPrefix()); err == nil {
				cc[0].Compact(context.Background(), resp.Header.Revision)
			}
			time.Sleep(3 * time.Second)
		}
	}
	fmt.Println()
	fmt.Println("| variant | puts/s median [min, max] | etcd CPU µs/put | follower etcd CPU µs/put | etcdscope CPU µs/put | put p99 ms |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, v := range variants {
		var tp, ecpu, fcpu, tcpu, p99 []float64
		for _, x := range runs {
			if x.variant == v {
				tp = append(tp, float64(x.puts)/x.seconds)
				ecpu = append(ecpu, x.etcdCPUSec*1e6/float64(x.puts))
				fcpu = append(fcpu, x.followerCPUSec*1e6/float64(x.puts))
				tcpu = append(tcpu, x.tracerCPUSec*1e6/float64(x.puts))
				p99 = append(p99, ms(x.p99))
			}
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", v, spread(tp, "%.0f"), spread(ecpu, "%.1f"), spread(fcpu, "%.1f"), spread(tcpu, "%.2f"), spread(p99, "%.1f"))
	}
	return nil
}

// tracedPid is the member variant v traces: the follower's for
// serve-follower, else the leader's.
func tracedPid(v string, leader, follower int) int {
	if strings.HasPrefix(v, "serve-follower") {
		return follower
	}
	return leader
}

// findLeader waits up to 30 s for a leader and returns its member index.
func findLeader() (int, error) {
	var eps []string
	for i := range members {
		eps = append(eps, fmt.Sprintf("127.0.0.1:%d", clientPort+i))
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		for i, ep := range eps {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := c.Status(ctx, ep)
			cancel()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("no leader among %d members after 30 s", members)
}

// startTracer starts etcdscope on etcd pid as variant v asks (commit, or
// serve with --commit-pid for the serve variants) and waits for its ready
// file.
func startTracer(es, dir, v string, pid, sample int) (*exec.Cmd, error) {
	args := []string{"commit", "--pid", strconv.Itoa(pid), "--duration", "0", "--ready-file", filepath.Join(dir, "ready")}
	if strings.HasPrefix(v, "serve-") { // the DaemonSet's agent: fsync and commit of the member
		args = []string{"serve", "--listen", serveListen, "--pid", strconv.Itoa(pid), "--commit-pid", strconv.Itoa(pid), "--ready-file", filepath.Join(dir, "ready")}
		if strings.HasSuffix(v, "-fsync") { // the agent without the commit tracer
			args = []string{"serve", "--listen", serveListen, "--pid", strconv.Itoa(pid), "--ready-file", filepath.Join(dir, "ready")}
		}
	}
	switch {
	case strings.HasSuffix(v, "-duty") && strings.HasPrefix(v, "serve-"):
		args = append(args, "--commit-duty", duty)
	case strings.HasSuffix(v, "-sample") && strings.HasPrefix(v, "serve-"):
		args = append(args, "--commit-sample", strconv.Itoa(sample))
	case strings.HasSuffix(v, "-sample"):
		args = append(args, "--sample", strconv.Itoa(sample))
	}
	if strings.Contains(v, "-nogrpc") {
		args = append(args, "--grpc=false")
	}
	if v == "commit-raw" { // every firing to userspace, joined in Go: the reference
		args = append(args, "--raw-events")
	}
	os.Remove(filepath.Join(dir, "ready"))
	tr := exec.Command(es, args...)
	// dir is this run's own os.MkdirTemp directory (0700): nothing in it
	// can have been planted.
	for _, o := range []struct {
		dst  *io.Writer
		name string
	}{{&tr.Stdout, v + ".stdout"}, {&tr.Stderr, v + ".stderr"}} {
		f, err := os.Create(filepath.Join(dir, o.name))
		if err != nil {
			return nil, err
		}
		defer f.Close() // the child holds its own copy once started
		*o.dst = f
	}
	if err := tr.Start(); err != nil {
		return nil, err
	}
	if err := waitFile(filepath.Join(dir, "ready"), 30*time.Second); err != nil {
		tr.Process.Kill()
		tr.Wait()
		return nil, fmt.Errorf("%s: %w", v, err)
	}
	return tr, nil
}

// load runs check perf --load l's puts for d and returns each successful
// put's latency, the errors and the seconds it ran.
func load(cc []*clientv3.Client, d time.Duration, prefix string) ([]time.Duration, int, float64) {
	ops := make(chan string, clients)
	var mu sync.Mutex
	var lats []time.Duration
	errs := 0
	val := string(make([]byte, 1024))
	var wg sync.WaitGroup
	for _, c := range cc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			bad := 0
			for k := range ops {
				st := time.Now()
				_, err := c.Put(context.Background(), k, val)
				if err != nil {
					bad++
					continue
				}
				mine = append(mine, time.Since(st))
			}
			mu.Lock()
			lats, errs = append(lats, mine...), errs+bad
			mu.Unlock()
		}()
	}
	start := time.Now()
	k := make([]byte, 256-len(prefix))
	for i := 0; ; i++ {
		next := start.Add(time.Duration(i) * time.Second / time.Duration(limit))
		if time.Until(next) > 0 {
			time.Sleep(time.Until(next))
		}
		if time.Since(start) >= d {
			break
		}
		binary.PutVarint(k, rand.Int63())
		ops <- prefix + string(k)
	}
	close(ops)
	wg.Wait()
	return lats, errs, time.Since(start).Seconds()
}

// serveCounts reads the serve variant's etcdscope_commit_writes_seen_total
// and _attached_seconds_total (-1 when it does not answer).
func serveCounts() (seen, attached float64) {
	seen, attached = -1, -1
	resp, err := http.Get("http://" + serveListen + "/metrics")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch name {
		case "etcdscope_commit_writes_seen_total":
			seen, _ = strconv.ParseFloat(val, 64)
		case "etcdscope_commit_attached_seconds_total":
			attached, _ = strconv.ParseFloat(val, 64)
		}
	}
	return
}

// seenNote is a serve run's writes seen (of the run's puts: the leader's,
// or the follower's entries' writes) and attached seconds, "" otherwise.
func seenNote(x run) string {
	if x.seen < 0 && x.attachedSec < 0 || x.seen == 0 && x.attachedSec == 0 {
		return ""
	}
	return fmt.Sprintf("%.0f (%.0f%% of puts), %.1f", x.seen, 100*x.seen/float64(x.puts), x.attachedSec)
}

// cpuSec is process pid's user+system CPU time (all its threads, the
// exited ones too), s.
func cpuSec(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseFloat(f[11], 64) // utime: field 14
	k, _ := strconv.ParseFloat(f[12], 64) // stime: field 15
	return (u + k) / 100, nil             // USER_HZ
}

func waitFile(p string, d time.Duration) error {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(p); err == nil {
			return nil
		}
	}
	return fmt.Errorf("no ready file after %v", d)
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func spread(xs []float64, f string) string {
	slices.Sort(xs)
	if len(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf(f+" ["+f+", "+f+"]", xs[len(xs)/2], xs[0], xs[len(xs)-1])
}
