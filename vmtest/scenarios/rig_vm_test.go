//go:build vmtest

package scenarios

// The rig every scenario shares: three network namespaces esm1..esm3,
// each joined to the rig's root namespace by a veth pair (eth0 inside,
// esr<i> outside), routed through the root namespace (ip_forward):
//
//	m1 10.77.1.1 ── esr1 10.77.1.254 ┐
//	m2 10.77.2.1 ── esr2 10.77.2.254 ├─ root namespace: the test (load client, scrapes, etcdscope)
//	m3 10.77.3.1 ── esr3 10.77.3.254 ┘
//
// so each member has one NIC, as on a real host, and netem on a member's
// eth0 delays what that member sends. Faults are applied with the built
// `etcdscope netem apply --netns esm<i> --dev eth0`, as a user would.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	dto "github.com/prometheus/client_model/go"

	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// Load sizes per phase: sequential requests from one client on m1.
const (
	opsPerPhase = 40
	valueBytes  = 256
	opTimeout   = 15 * time.Second
)

// healthWait bounds the members' start: under TCG on a loaded host three
// members took more than etcdtest's default 30 s.
const healthWait = 3 * time.Minute

// etcdArgs raise the election timeouts as RKE2 does (heartbeat 500 ms,
// election 5 s): the emulated guest stalls for hundreds of ms under load,
// and the field's stretched clusters run with these values.
var etcdArgs = []string{"--heartbeat-interval=500", "--election-timeout=5000"}

type rig struct {
	t        *testing.T
	ns       []string
	ips      []netip.Addr
	bin      string // etcdscope
	stateDir string
	c        *etcdtest.Cluster
	m        []*etcdtest.Member
	cli      *clientv3.Client // endpoint m1 only: the client sits next to a near member
	// requested counts the leader changes the scenario asked for.
	requested int
}

func sh(t *testing.T, args ...string) string { t.Helper(); return testenv.Run(t, args...) }

// newRig builds the namespaces and starts the three members in them.
func newRig(t *testing.T) *rig { return newRigWith(t, "") }

// newRigWith is newRig with the members' data dirs under dataDir ("": a
// temporary directory; a scenario mounts a slow device at
// dataDir/m<i> first).
func newRigWith(t *testing.T, dataDir string) *rig {
	testenv.RequireRoot(t)
	testenv.LookPath(t, "ip", "iproute2")
	// Registered first, so it runs last: on failure the scenario's failed
	// checks are repeated after the members' log tails, where a CI log's
	// excerpt (its tail) shows them.
	t.Cleanup(func() {
		if f, ok := lastWords.LoadAndDelete(t); ok && t.Failed() {
			t.Logf("scenario %s failed checks:\n%s", t.Name(), f)
		}
	})
	r := &rig{t: t, stateDir: t.TempDir()}
	r.bin = filepath.Join(testenv.RepoRoot(t), "bin", "etcdscope")
	if _, err := os.Stat(r.bin); err != nil {
		t.Fatalf("no etcdscope at %s (vmtest/run.sh builds it)", r.bin)
	}
	const fwd = "/proc/sys/net/ipv4/ip_forward"
	old, err := os.ReadFile(fwd)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fwd, []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile(fwd, old, 0o644) })
	for i := 1; i <= 3; i++ {
		ns, outer := fmt.Sprintf("esm%d", i), fmt.Sprintf("esr%d", i)
		sh(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		sh(t, "ip", "link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", ns)
		t.Cleanup(func() { exec.Command("ip", "link", "del", outer).Run() })
		ip := fmt.Sprintf("10.77.%d.1", i)
		gw := fmt.Sprintf("10.77.%d.254", i)
		sh(t, "ip", "addr", "add", gw+"/24", "dev", outer)
		sh(t, "ip", "link", "set", outer, "up")
		sh(t, "ip", "-n", ns, "addr", "add", ip+"/24", "dev", "eth0")
		sh(t, "ip", "-n", ns, "link", "set", "eth0", "up")
		sh(t, "ip", "-n", ns, "link", "set", "lo", "up")
		sh(t, "ip", "-n", ns, "route", "add", "default", "via", gw)
		r.ns = append(r.ns, ns)
		r.ips = append(r.ips, netip.MustParseAddr(ip))
	}
	var ips []string
	for _, a := range r.ips {
		ips = append(ips, a.String())
	}
	r.c = etcdtest.Start(t, etcdtest.Options{Members: 3, IPs: ips, NetNS: r.ns, DataDir: dataDir, ExtraArgs: etcdArgs, HealthTimeout: healthWait})
	r.m = r.c.Members
	r.cli, err = clientv3.New(clientv3.Config{Endpoints: []string{r.m[0].ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cli.Close() })
	return r
}

// netem runs `etcdscope netem apply --netns <member's ns> --dev eth0
// --peer ... --delay D` for member i (0-based) and registers its clear.
func (r *rig) netem(i int, delay string, peers ...int) {
	r.t.Helper()
	args := []string{"netem", "apply", "--netns", r.ns[i], "--dev", "eth0", "--delay", delay, "--state-dir", r.stateDir}
	for _, p := range peers {
		args = append(args, "--peer", r.ips[p].String())
	}
	out, err := exec.Command(r.bin, args...).CombinedOutput()
	if err != nil {
		r.t.Fatalf("etcdscope %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	r.t.Logf("etcdscope %s:\n%s", strings.Join(args, " "), out)
	r.t.Cleanup(func() {
		exec.Command(r.bin, "netem", "clear", "--netns", r.ns[i], "--dev", "eth0", "--state-dir", r.stateDir).Run()
	})
}

// leader returns the index of the member that leads now.
func (r *rig) leader() int {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	l, err := r.c.Leader(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	return slices.Index(r.m, l)
}

// moveLeader hands leadership to member i with the client API's
// MoveLeader (sent to the current leader) and waits until i leads.
func (r *rig) moveLeader(i int) {
	r.t.Helper()
	cur := r.leader()
	if cur == i {
		return
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{r.m[cur].ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		r.t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.MoveLeader(ctx, r.m[i].ID); err != nil {
		r.t.Fatalf("MoveLeader %s -> %s: %v", r.m[cur].Name, r.m[i].Name, err)
	}
	r.requested++
	for r.leader() != i {
		if ctx.Err() != nil {
			r.t.Fatalf("%s does not lead 30 s after MoveLeader", r.m[i].Name)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.t.Logf("leader moved %s -> %s", r.m[cur].Name, r.m[i].Name)
}

// phase runs the load from the client on m1: opsPerPhase sequential puts,
// serializable gets and linearizable gets, each timed on the client.
func (r *rig) phase(name string, expect map[Op]Expect) Phase {
	r.t.Helper()
	return runPhase(r.t, r.cli, name, expect)
}

// runPhase is the load of one phase through cli (see rig.phase).
func runPhase(t *testing.T, cli *clientv3.Client, name string, expect map[Op]Expect) Phase {
	t.Helper()
	ph := Phase{Name: name, Lat: map[Op][]time.Duration{}, Expect: expect}
	value := string(bytes.Repeat([]byte{'v'}, valueBytes))
	key := "/scenario/" + strings.ReplaceAll(name, " ", "_")
	do := func(op Op, f func(ctx context.Context) error) {
		for i := 0; i < opsPerPhase; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			start := time.Now()
			err := f(ctx)
			d := time.Since(start)
			cancel()
			if err != nil {
				t.Errorf("%s: %s %d: %v", name, op, i, err)
				return
			}
			ph.Lat[op] = append(ph.Lat[op], d)
		}
	}
	started := time.Now()
	n := 0
	do(Write, func(ctx context.Context) error {
		n++
		_, err := cli.Put(ctx, fmt.Sprintf("%s/%04d", key, n), value)
		return err
	})
	do(ReadSerial, func(ctx context.Context) error {
		_, err := cli.Get(ctx, key+"/0001", clientv3.WithSerializable())
		return err
	})
	do(ReadLinear, func(ctx context.Context) error {
		_, err := cli.Get(ctx, key+"/0001")
		return err
	})
	w50, w99 := Quantiles(ph.Lat[Write])
	t.Logf("phase %q: %s; write p50 %v p99 %v", name, time.Since(started).Round(time.Millisecond), w50, w99)
	return ph
}

// warmUp makes the client's connection and etcd's first proposals
// before anything is timed.
func (r *rig) warmUp() { warmUp(r.t, r.cli) }

func warmUp(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	for i := 0; i < 10; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		_, err := cli.Put(ctx, "/scenario/warmup", "x")
		cancel()
		if err != nil {
			t.Fatalf("warm-up put: %v", err)
		}
	}
}

// connectFastest is the fastest of n TCP connects from member i's
// namespace to member j's port: the path's RTT as a client sees it.
func (r *rig) connectFastest(i, j int, port uint16, n int) time.Duration {
	r.t.Helper()
	to := netip.AddrPortFrom(r.ips[j], port).String()
	best := time.Duration(1<<63 - 1)
	testenv.InNetns(r.t, r.ns[i], func() {
		for k := 0; k < n; k++ {
			start := time.Now()
			c, err := net.DialTimeout("tcp", to, 5*time.Second)
			d := time.Since(start)
			if err != nil {
				r.t.Fatalf("connect %s from %s: %v", to, r.ns[i], err)
			}
			c.Close()
			best = min(best, d)
		}
	})
	return best
}

// scrape returns member i's metrics.
func (r *rig) scrape(i int) map[string]*dto.MetricFamily {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	fams, err := r.c.Scrape(ctx, r.m[i])
	if err != nil {
		r.t.Fatal(err)
	}
	return fams
}

// histogram returns sum and count of a histogram family's series whose
// labels include all of match (nil: every series).
func histogram(fams map[string]*dto.MetricFamily, name string, match map[string]string) (sum float64, count uint64) {
	for _, m := range fams[name].GetMetric() {
		ok := true
		for k, v := range match {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			ok = ok && found
		}
		if ok && m.Histogram != nil {
			sum += m.Histogram.GetSampleSum()
			count += m.Histogram.GetSampleCount()
		}
	}
	return sum, count
}

// histMean is the mean of a histogram's observations between two scrapes
// (and how many there were).
func histMean(a, b map[string]*dto.MetricFamily, name string, match map[string]string) (time.Duration, uint64) {
	s0, c0 := histogram(a, name, match)
	s1, c1 := histogram(b, name, match)
	if c1 <= c0 {
		return 0, 0
	}
	return time.Duration((s1 - s0) / float64(c1-c0) * 1e9), c1 - c0
}

// toLabel is the To label etcd gives member m's peer series.
func toLabel(m *etcdtest.Member) map[string]string {
	return map[string]string{"To": fmt.Sprintf("%x", m.ID)}
}

// toolRun is a running etcdscope subcommand in the root namespace.
type toolRun struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	exited         chan struct{}
	err            error
	attached       time.Time // when its ready file appeared
}

// startTool starts `etcdscope ARGS... --ready-file F` and waits until its
// probes are attached (F exists).
func startTool(t *testing.T, bin string, args ...string) *toolRun {
	t.Helper()
	return startToolIn(t, "", bin, args...)
}

// startToolIn is startTool in network namespace netns (`ip netns exec`,
// which execs: the pid is etcdscope's); "" is the rig's root namespace.
func startToolIn(t *testing.T, netns, bin string, args ...string) *toolRun {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	p := &toolRun{name: "etcdscope " + args[0], exited: make(chan struct{})}
	argv := append(args, "--ready-file", ready)
	if netns != "" {
		argv = append([]string{"netns", "exec", netns, bin}, argv...)
		bin = "ip"
	}
	p.cmd = exec.Command(bin, argv...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			p.attached = time.Now()
			return p
		}
		select {
		case <-p.exited:
			t.Fatalf("%s exited before attaching: %v\n%s", p.name, p.err, p.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s wrote no ready file in 60 s\n%s", p.name, p.stderr.String())
		}
	}
}

// etcdObserveEvery is how often etcd observes each of its probers' RTT
// into etcd_network_peer_round_trip_time_seconds (rafthttp's
// statusMonitoringInterval).
const etcdObserveEvery = 30 * time.Second

// commitScrapeEvery is how often commit scrapes every member's /metrics
// during its run (pipeline's modelScrapeEvery); scrapeTCG bounds one such
// scrape of three members in this guest (1-3 s seen).
const (
	commitScrapeEvery = 5 * time.Second
	scrapeTCG         = 3 * time.Second
)

// stopForModel is stop for an `etcdscope commit` whose kernel-only model is
// judged: it waits until the run has lasted etcdObserveEvery + 2 s. The
// model reads each follower's RTT from that histogram's delta over the
// run, and a shorter run may hold no observation: an all-scenarios run's
// 6.8 s "m2 down" phase had none toward m3, so the model counted m3 down
// and knew no vote. In this guest the end scrape (1 s) often misses every
// member and the model's window ends on the latest scrape from during
// the run: it waits for one more of those (commitScrapeEvery + scrapeTCG)
// after the observation (first run with that scrape: the near phase's
// windows ended 6.7 s early, and the model's vote went to m3: a follower
// RTT without an observation in the window is the mean since etcd
// started, which for m3 holds the RTTs from before netem).
func (p *toolRun) stopForModel(t *testing.T) []byte {
	t.Helper()
	if wait := time.Until(p.attached.Add(etcdObserveEvery + 2*time.Second + commitScrapeEvery + scrapeTCG)); wait > 0 {
		t.Logf("%s: waiting %v more for etcd's next peer RTT observations (the model's input)", p.name, wait.Round(time.Second))
		time.Sleep(wait)
	}
	return p.stop(t)
}

// stop ends the run with SIGINT (its Ctrl-C: it drains and reports) and
// returns what it printed.
func (p *toolRun) stop(t *testing.T) []byte {
	t.Helper()
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not exit 60 s after SIGINT\n%s", p.name, p.stderr.String())
	}
	if p.err != nil {
		t.Errorf("%s: %v\n%s", p.name, p.err, p.stderr.String())
	}
	return p.stdout.Bytes()
}

// startPeers starts `etcdscope peers --duration 0 --output json
// --etcd-metrics <m1> --etcd-endpoints <m1>`.
func (r *rig) startPeers() *toolRun {
	r.t.Helper()
	// In m1's network namespace, as etcdscope on m1's node shares its
	// network: etcdscope's own kept-alive probe (the model's input for
	// etcd's kept-alive prober) then crosses the delayed link as etcd's
	// does. From the root namespace (10.77.3.254) it crossed none of the
	// rig's netem, which filters by member address, so the model missed
	// the far RTT on that prober, RTT/2 of the metric's mean (runs 5-18:
	// verdicts 0.77-1.43x against the 1.5x limit). Finding a member in
	// another namespace stays pinned by host's TestListenerPIDOtherNetns
	// and cmd/etcdscope's peers tests.
	return startToolIn(r.t, r.ns[0], r.bin, "peers", "--duration", "0", "--output", "json",
		"--etcd-metrics", r.m[0].MetricsURL, "--etcd-endpoints", r.m[0].ClientURL)
}

// startCommit starts `etcdscope commit --pid <member i> --etcd-endpoints
// <member i> --duration 0 --output json`: what each write on member i
// waits on (issue 15), stopped with toolRun.stop and read by commitChecks.
func (r *rig) startCommit(i int) *toolRun {
	r.t.Helper()
	return startTool(r.t, r.bin, "commit", "--pid", strconv.Itoa(r.m[i].PID), "--etcd-endpoints", r.m[i].ClientURL,
		"--duration", "0", "--output", "json")
}

// commitChecks judges a stopped `etcdscope commit` on the leader against
// the phase it traced: every write of the phase traced, none lost; the
// quorum's deciding vote is member decider (1-based, as the scenarios
// name members) for at least 90% of them; quorum_wait p50 at least lo
// (the ack crossed the delayed link); the split's total p50 no more than
// the client's put p50. Under TCG each uprobe hit is an emulated trap on
// the guest's one vCPU, shared by all three members and the client
// (degraded run 2: client put p50 340 ms traced against 177 ms in run 1
// untraced), so upper bounds on time are not judged here: the split's
// timing against a client is TestCommitSplit's, on real CPUs.
func (r *rig) commitChecks(out []byte, ph Phase, decider int, lo time.Duration) []Check {
	r.t.Helper()
	recs, sum, err := commit.ReadRecords(bytes.NewReader(out))
	if err != nil || sum == nil {
		r.t.Errorf("etcdscope commit printed no summary: %v\n%s", err, out)
		return nil
	}
	want := strconv.FormatUint(r.m[decider-1].ID, 16)
	decided := 0
	for _, rec := range recs {
		if rec.Decider == want {
			decided++
		}
	}
	name := r.m[decider-1].Name
	puts := len(ph.Lat[Write])
	client, _ := Quantiles(ph.Lat[Write])
	server := time.Duration(sum.TotalNs.P50)
	qw := time.Duration(sum.PartsNs[commit.PartQuorumWait].P50)
	r.t.Logf("etcdscope commit on m1: %d writes, total p50 %v, parts p50 %v, deciders %v, verdicts %v", len(recs), server, partsP50(sum), sum.Deciders, sum.Verdicts)
	checks := modelChecks(sum, want, name)
	if lo > 0 { // 0: no delayed link to cross (commitNearChecks bounds it from above)
		checks = append(checks, Check{Name: "etcdscope commit: quorum_wait p50 (the ack crosses the delayed link)", Got: ms(qw), Want: ">= " + ms(lo), Pass: qw >= lo})
	}
	return append(checks, []Check{
		tracedCheck("etcdscope commit", len(recs), puts, sum),
		{Name: "etcdscope commit: the quorum's deciding vote", Got: fmt.Sprintf("%s in %d of %d writes (all: %v)", name, decided, len(recs), sum.Deciders),
			Want: name + " in >= 90%", Pass: len(recs) > 0 && decided*10 >= len(recs)*9},
		{Name: "etcdscope commit: split total p50 within the client's put p50", Got: fmt.Sprintf("%s = %.2f x %s", ms(server), float64(server)/float64(max(client, 1)), ms(client)),
			Want: "<= 1.0 x", Pass: server > 0 && server <= client},
	}...)
}

// modelChecks: where both sources run (uprobes and the kernel-only model
// from etcd's metrics and the kernel's srtt), they name the same deciding
// vote (want, the member's hex ID; name as the scenario calls it); the
// model's expected time is shown beside the traced p50, not judged (under
// TCG the uprobes' traps stretch the traced side).
func modelChecks(sum *commit.SummaryRecord, want, name string) []Check {
	// The model needs every member's /metrics at the end, within commit's
	// 1 s finish (its 2 s exit promise). In this guest (one TCG vCPU, three
	// members, the client and commit's teardown at once) that scrape missed
	// a member in 4 of 6 runs of this scenario on 2026-12-06 (no model in both
	// leader phases; "too few followers answered" twice; "no WAL fsync
	// observed by the leader" once: its scrape late), asked one after the
	// other and then all at once (78c38f7: 1 of 2 runs); it was shown in
	// make vmtest then (6948d6e). Commit now keeps each member's latest
	// scrape from during the run (every 5 s) and uses it for a member the
	// end scrape misses (model_scrapes says which): judged again, in CI too.
	// Since then (2026-12-06, sixth session, the scenario alone, judged, 5
	// runs that finished at host loads 5-10; docs/testing.md): a model in
	// 10 of 10 judged phases, 9 of them on at least one during-run scrape
	// (the end scrape missed every member that was up in 8: under TCG it
	// times out connecting or parsing), those 1.0-7.9 s before the end,
	// worst 13.7 s; the vote agreed in 9 of 10, 8 of 8 since stopForModel
	// waits one more during-run scrape.
	if sum.Model == nil {
		return []Check{{Name: "etcdscope commit: the kernel-only model ran beside the uprobes", Got: "no model in the summary: " + sum.ModelNotComputed + scrapesUsed(sum), Want: "a model", Pass: false}}
	}
	got := strconv.FormatUint(sum.Model.Decider, 16)
	switch {
	case !sum.Model.DeciderKnown:
		// LocalVote is 0, the zero value: an unknown vote printed as
		// "local_wal" before.
		got = "unknown (too few followers answered in the model's inputs)"
	case sum.Model.Decider == commit.LocalVote:
		got = "local_wal"
	}
	return []Check{
		// The model picks its vote from mean times (the leader's WAL
		// fsync against a follower's RTT + fsync): a starved guest can
		// make them tie (degraded, load 8: the local WAL at 73 ms against
		// m2's 50 ms RTT + its fsync), so this is a timing check.
		{Name: "etcdscope commit: the model's deciding vote agrees with the uprobes'", Got: got + scrapesUsed(sum), Want: name + " (" + want + ")",
			Pass: sum.Model.DeciderKnown && got == want, Timing: true},
		{Name: "etcdscope commit: model expected per write vs traced total p50", Info: true,
			Got: fmt.Sprintf("%s vs %s; quorum_wait from %s", ms(time.Duration(sum.Model.ExpectedNs)), ms(time.Duration(sum.TotalNs.P50)), sum.Model.Parts[commit.PartQuorumWait].Source)},
		{Name: "etcdscope commit: the model's /metrics per member (end, or the latest from during the run)", Info: true, Got: scrapesUsed(sum)},
	}
}

// scrapesUsed lists, per member, which /metrics scrape the model's
// numbers end on and how far short of the end (model_scrapes).
func scrapesUsed(sum *commit.SummaryRecord) string {
	var b strings.Builder
	for _, u := range sum.ModelScrapes {
		fmt.Fprintf(&b, "; %s: %s", u.Member, u.Scrape)
		if u.Scrape == commit.ScrapeDuring {
			fmt.Fprintf(&b, " (%s short, over %s)", ms(time.Duration(u.ShortNs)), ms(time.Duration(u.WindowNs)))
		}
		if u.EndErr != "" {
			fmt.Fprintf(&b, " (end: %s)", u.EndErr)
		}
	}
	return b.String()
}

// commitNearChecks judges `etcdscope commit` on the leader of a healthy
// stretched cluster: every write traced; the near member (decider,
// 1-based) the deciding vote of >= 90%; quorum_wait p50 under far (the far
// member's round trip is not waited for: a timing check, the guest's CPU
// is in it); both sources agree on the vote.
func (r *rig) commitNearChecks(out []byte, ph Phase, decider int, far time.Duration) []Check {
	r.t.Helper()
	checks := r.commitChecks(out, ph, decider, 0)
	recs, sum, err := commit.ReadRecords(bytes.NewReader(out))
	if err != nil || sum == nil {
		return checks
	}
	// With both followers up the quorum is the leader's own WAL fdatasync
	// and the near member's ack: whichever of the two ends last decides
	// (the near ack can beat the leader's own fsync: runs 18b and 19 read
	// local_wal in 3-4 of 40). What the stretched cluster must show is
	// that the far member is not waited for: the near side (the near
	// member or the local WAL) decides >= 90%. A starved guest can hold
	// the near ack past the far one's (load 8: m3 decided 5 of 40): a
	// timing check.
	want := strconv.FormatUint(r.m[decider-1].ID, 16)
	near := 0
	for _, rec := range recs {
		if rec.Decider == want || rec.Decider == "local_wal" {
			near++
		}
	}
	for i := range checks {
		if strings.HasPrefix(checks[i].Name, "etcdscope commit: the model's deciding vote agrees") {
			// Here the model tells m2 (0 RTT) from m3 (50 ms) by etcd's
			// peer RTT metric, which carries each member's answer time;
			// in this guest the two members' answer times differ by a
			// per-run bias that can exceed the 50 ms (run 21: m2 92.9 ms,
			// m3 103.8 ms, and the model picked m3). Judged by make
			// scenario(s); the m2-down phase's model vote stays judged.
			checks[i] = ShownInCI(checks[i], os.Getenv("VMTEST_RUN") == "")
		}
		if strings.HasPrefix(checks[i].Name, "etcdscope commit: the quorum's deciding vote") {
			checks[i] = Check{Name: "etcdscope commit: the quorum's deciding vote (near side: " + r.m[decider-1].Name + " or the leader's own WAL)",
				Got:  fmt.Sprintf("%d of %d writes (all: %v)", near, len(recs), sum.Deciders),
				Want: ">= 90%", Pass: len(recs) > 0 && near*10 >= len(recs)*9, Timing: true}
		}
	}
	qw := time.Duration(sum.PartsNs[commit.PartQuorumWait].P50)
	return append(checks, Check{Name: "etcdscope commit: quorum_wait p50 (the near member's ack, not the far one's)", Got: ms(qw),
		Want: "< " + ms(far), Pass: qw < far, Timing: true})
}

// commitForwardChecks judges a stopped `etcdscope commit` on a follower
// (m1 while the far m3 leads): every write of the phase traced, none
// lost; the dominant wait is forwarding to the leader, its p50 at least
// lo (the round trips to the far leader), and the verdict says so.
func (r *rig) commitForwardChecks(out []byte, ph Phase, lo time.Duration) []Check {
	r.t.Helper()
	recs, sum, err := commit.ReadRecords(bytes.NewReader(out))
	if err != nil || sum == nil {
		r.t.Errorf("etcdscope commit printed no summary: %v\n%s", err, out)
		return nil
	}
	puts := len(ph.Lat[Write])
	fwd := time.Duration(sum.PartsNs[commit.PartForward].P50)
	verdict := ""
	if len(sum.Verdicts) > 0 {
		verdict = sum.Verdicts[0]
	}
	r.t.Logf("etcdscope commit on m1 (follower): %d writes, total p50 %v, parts p50 %v, verdicts %v", len(recs), time.Duration(sum.TotalNs.P50), partsP50(sum), sum.Verdicts)
	return []Check{
		tracedCheck("etcdscope commit on a follower", len(recs), puts, sum),
		{Name: "etcdscope commit on a follower: forward p50 (to the far leader and back)", Got: ms(fwd), Want: ">= " + ms(lo), Pass: fwd >= lo},
		{Name: "etcdscope commit on a follower: verdict", Got: verdict, Want: "writes wait on forwarding to the leader",
			Pass: strings.HasPrefix(verdict, "writes wait on forwarding to the leader")},
	}
}

// commitDownCheck: the verdict of `etcdscope commit` on the leader names
// the stopped member (1-based) as the reason the deciding vote decides.
func (r *rig) commitDownCheck(out []byte, down int) Check {
	r.t.Helper()
	_, sum, err := commit.ReadRecords(bytes.NewReader(out))
	if err != nil || sum == nil {
		return Check{Name: "etcdscope commit: verdict names the member that is down", Got: fmt.Sprint(err), Want: "a summary"}
	}
	id := strconv.FormatUint(r.m[down-1].ID, 16)
	v := strings.Join(sum.Verdicts, " | ")
	return Check{Name: "etcdscope commit: verdict names the member that is down", Got: v,
		Want: fmt.Sprintf("'%s ... sent no ack'", id), Pass: strings.Contains(v, id) && strings.Contains(v, "sent no ack")}
}

// tracedCheck: `etcdscope commit` (what, as the check names it) traced
// every put of the phase, with nothing lost or missed.
func tracedCheck(what string, writes, puts int, sum *commit.SummaryRecord) Check {
	return Check{Name: what + ": writes traced, lost events", Got: fmt.Sprintf("%d writes (%d puts made), %d lost, %d missed", writes, puts, sum.LostEvents, sum.Missed),
		Want: "all the puts, 0 lost", Pass: writes >= puts && sum.LostEvents == 0 && sum.Missed == 0}
}

func partsP50(sum *commit.SummaryRecord) map[string]time.Duration {
	out := map[string]time.Duration{}
	for k, v := range sum.PartsNs {
		out[k] = time.Duration(v.P50)
	}
	return out
}

// peersReport is the part of `etcdscope peers --output json` the
// scenarios read (docs/peers.md; decoded here, not through the analysis
// types, so that the JSON is what is checked).
type peersReport struct {
	LostEvents   uint64 `json:"lost_events"`
	MemberPID    int    `json:"member_pid"`
	MetricsError string `json:"metrics_error"`
	Links        []struct {
		Link struct {
			From netip.Addr `json:"from"`
			To   netip.Addr `json:"to"`
		} `json:"link"`
		HandshakeRTT struct {
			Count int64 `json:"count"`
			Min   int64 `json:"min"`
		} `json:"handshake_rtt_ns"`
	} `json:"links"`
	Metric []struct {
		Peer         netip.Addr `json:"peer"`
		Member       string     `json:"member"`
		Mean         float64    `json:"mean_seconds"`
		Inflation    float64    `json:"inflation"`
		Explained    bool       `json:"explained"`
		Inconclusive bool       `json:"inconclusive"`
		Verdict      string     `json:"verdict"`
		Input        struct {
			// NewConnProbe: the mean lifetime of the per-request
			// connections etcd's dialing prober opened to the peer.
			NewConnProbe int64 `json:"new_conn_probe_ns"`
		} `json:"input"`
	} `json:"metric"`
	ProbeErrors map[string]string `json:"kept_alive_probe_errors"`
}

// peersOf decodes the report of a stopped `etcdscope peers`.
func peersOf(t *testing.T, out []byte) peersReport {
	t.Helper()
	var rep peersReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("etcdscope peers printed no JSON report: %v\n%s", err, out)
	}
	return rep
}

// handshakeRTT is the fastest handshake RTT etcdscope saw on a link
// between a and b (either direction), 0 if none. Handshakes, not min RTT:
// the kernel's min_rtt is a 300 s windowed minimum (tcp_min_rtt_wlen), so
// a connection opened before netem keeps the undelayed path's minimum for
// five minutes (run 1 read 0.2 ms); etcd's dialing prober opens a new
// connection every 4 s, so each window has handshakes on the delayed path.
func (rep *peersReport) handshakeRTT(a, b netip.Addr) time.Duration {
	var best int64
	for _, l := range rep.Links {
		if !(l.Link.From == a && l.Link.To == b || l.Link.From == b && l.Link.To == a) {
			continue
		}
		if s := l.HandshakeRTT; s.Count > 0 && s.Min > 0 && (best == 0 || s.Min < best) {
			best = s.Min
		}
	}
	return time.Duration(best)
}

// dialProbe is the mean lifetime of the per-request connections that
// etcdscope saw etcd's dialing prober open toward peer, 0 if none.
func (rep *peersReport) dialProbe(peer netip.Addr) time.Duration {
	for _, m := range rep.Metric {
		if m.Peer == peer {
			return time.Duration(m.Input.NewConnProbe)
		}
	}
	return 0
}

// verdict reports etcdscope's metric verdict toward peer: explained or
// inconclusive (false, false when it has none).
func (rep *peersReport) verdict(peer netip.Addr) (explained, inconclusive bool) {
	for _, m := range rep.Metric {
		if m.Peer == peer {
			return m.Explained, m.Inconclusive
		}
	}
	return false, false
}

// explanation is etcdscope's metric verdict toward peer, in one line.
func (rep *peersReport) explanation(peer netip.Addr) string {
	var parts []string
	if rep.MetricsError != "" {
		parts = append(parts, "metrics error: "+rep.MetricsError)
	}
	for _, m := range rep.Metric {
		if m.Peer == peer {
			parts = append(parts, fmt.Sprintf("metric %.1fms, inflation %.1fx, explained=%v: %s", m.Mean*1e3, m.Inflation, m.Explained, m.Verdict))
		}
	}
	if e := rep.ProbeErrors[peer.String()]; e != "" {
		parts = append(parts, "probe error: "+e)
	}
	parts = append(parts, fmt.Sprintf("member pid %d", rep.MemberPID))
	return strings.Join(parts, "; ")
}

// selected reports whether this scenario was asked for by name: the
// scenarios outside CI run only under `make scenario(s)`, which sets
// VMTEST_RUN (a default `make vmtest` runs only the CI one).
func selected(t *testing.T) {
	if os.Getenv("VMTEST_RUN") == "" {
		t.Skip("not part of make vmtest: run it with `make scenario NAME=...` or `make scenarios` (docs/scenarios.md)")
	}
}

// finish prints the table and fails the test with its failures.
func finish(t *testing.T, rep *Report) {
	t.Helper()
	t.Log("\n" + rep.String())
	for _, f := range rep.Failures() {
		t.Error(f)
	}
	if f := rep.Failures(); len(f) > 0 {
		lastWords.Store(t, "  "+strings.Join(f, "\n  "))
		return
	}
	if n := rep.Unjudged(); n > 0 {
		// Not a pass: vmtest/run.sh reads this line and says SKIPPED.
		fmt.Printf("SCENARIO SKIPPED %s: %d latency verdicts and timing checks not judged (starved guest)\n", rep.Scenario, n)
		t.Skipf("SKIPPED: %d latency verdicts and timing checks not judged (starved guest)", n)
	}
}

// lastWords holds each failed scenario's failures (*testing.T → string)
// for newRig's last cleanup to repeat.
var lastWords sync.Map

// closingChecks are the checks every cluster scenario ends with: the
// leader changes m1 saw between the scrapes pre and end against the
// MoveLeader calls made since requestedPre, and etcdscope peers' reading
// of the delayed link m1<->member far (its fastest handshake at the
// nominal RTT, no lost events, its metric verdict: MetricVerdictCheck when
// judgeVerdict, else shown as info).
func (r *rig) closingChecks(pre, end map[string]*dto.MetricFamily, requestedPre int, prep peersReport, far int, judgeVerdict bool) []Check {
	const changed = "etcd_server_leader_changes_seen_total"
	changes := etcdtest.SumCounter(end, changed) - etcdtest.SumCounter(pre, changed)
	asked := r.requested - requestedPre
	name := r.m[far].Name
	return []Check{
		{Name: "leader changes seen by m1", Got: fmt.Sprintf("%.0f", changes), Want: fmt.Sprintf("%d (MoveLeader)", asked), Pass: int(changes) == asked},
		Within("etcdscope peers: handshake RTT m1<->"+name, prep.handshakeRTT(r.ips[0], r.ips[far]), stretchedRTT-5*time.Millisecond, stretchedRTT+10*time.Millisecond),
		{Name: "etcdscope peers: lost events", Got: fmt.Sprint(prep.LostEvents), Want: "0", Pass: prep.LostEvents == 0},
		r.metricVerdictCheck(prep, far, judgeVerdict),
	}
}

// metricVerdictCheck is MetricVerdictCheck on etcdscope peers' verdict
// toward member far; shown as info unless judge.
func (r *rig) metricVerdictCheck(prep peersReport, far int, judge bool) Check {
	explained, inconclusive := prep.verdict(r.ips[far])
	c := MetricVerdictCheck("etcdscope peers: metric check toward "+r.m[far].Name, prep.explanation(r.ips[far]), prep.MemberPID, explained, inconclusive)
	c.Info = !judge
	return c
}
