package exporter

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/exporter/otlp"
	"github.com/etcdscope/etcdscope/internal/buildinfo"
	"github.com/etcdscope/etcdscope/pipeline"
	"github.com/etcdscope/etcdscope/render"
)

// DefaultPort is etcdscope serve's port: taken from the range where
// Prometheus' "Default port allocations" wiki list continues after
// 9100-9999 filled up (docs/deploy.md says why this one).
const DefaultPort = 10380

// DefaultCompareWindow is how often the --etcd-metrics URLs are scraped and
// the inflation ratio recomputed: etcd's probers each observe the metric
// once per 30 s window, so two minutes hold about eight observations.
const DefaultCompareWindow = 2 * time.Minute

// Config is what `etcdscope serve` runs.
type Config struct {
	Listener net.Listener // where /metrics and /healthz are served
	// Fsync and Peers are the attached tracers (tracer.FsyncTracer,
	// tracer.PeersTracer; the caller loads them, so that this package
	// loads no BPF). Run reads them through package pipeline and closes
	// them when it ends.
	Fsync FsyncTracer
	Peers PeersTracer
	// Commit, if set, is the commit tracer attached to etcd process
	// CommitPID (`serve --commit-pid`): its writes are split into the
	// etcdscope_commit_* metrics (CommitMetrics). CommitUnavailable lists
	// the parts of a write its probes cannot show, each "part: why".
	Commit            CommitTracer
	CommitPID         int
	CommitUnavailable []analysis.Unavailable
	// CommitSampleEvery: the commit tracer follows 1 write in N
	// (tracer.CommitConfig.SampleEvery; 0 and 1: every write).
	CommitSampleEvery uint32
	// CommitSyncs, if set with Commit, is the fsync tracer on etcd
	// process CommitPID alone (with its scheduler states and writes): each
	// WAL Save's fdatasync in /commit/entries is split by cause
	// (pipeline.CommitOptions.Syncs). The commit run's session closes it.
	CommitSyncs CommitSyncTracer
	// CommitNoGRPC: the commit tracer leaves the unary RPC around each
	// write unprobed (tracer.CommitConfig.NoGRPC).
	CommitNoGRPC bool
	// CommitNext, if set (serve --commit-comm), is called when the
	// commit tracer's etcd exits: it waits for the next process of
	// CommitComm and returns its tracers, so that the agent follows etcd
	// across restarts (a static pod's, an upgrade's). With Commit nil it
	// is called at the start: serve waits for the first process (etcd
	// not running yet). Nil (--commit-pid: a pid names one process's
	// life) ends the commit run at the exit.
	CommitNext func(ctx context.Context) (CommitLife, error)
	CommitComm string
	// CommitDuty: the commit tracer's probes are attached only inside
	// its windows (serve --commit-duty; pipeline.RunDuty); the zero Duty
	// keeps them attached.
	CommitDuty commit.Duty
	// EtcdMetrics are etcd /metrics URLs of members on this host; each is
	// scraped every CompareWindow (0: DefaultCompareWindow) to export the
	// inflation ratio of its peer RTT metric.
	EtcdMetrics []string
	// EtcdEndpoints, if set, are client URLs asked for the member list at
	// each comparison, so each metric series is compared with the
	// connections to that one peer (and labelled with its address)
	// instead of with all of the member's connections pooled.
	EtcdEndpoints []string
	// EtcdTLS is used for https --etcd-metrics and the endpoints.
	EtcdTLS       *tls.Config
	CompareWindow time.Duration
	// Ready, if set, is called once the tracers are attached and the
	// server accepts connections.
	Ready func()
	Log   io.Writer // progress and warnings; nil: os.Stderr
	// PodLabels labels etcdscope_fsync_duration_seconds with the calling
	// process's pod UID and container ID, read from /proc/PID/cgroup
	// (PodResolver; at most MaxPodSeries distinct pairs).
	PodLabels bool
	// KeepComms: the comms whose series the bounds never fold into
	// "other" (Metrics.KeepComms); empty keeps etcd's.
	KeepComms []string
	// LossLogEvery is how often a tracer's loss is logged (one line per
	// tracer that lost events in the interval); 0 means LossLogEvery.
	LossLogEvery time.Duration
	// RingBytes is the ring size (--ring-size) the tracers were loaded
	// with, named in the loss log's fix; 0 leaves it out.
	RingBytes uint32
	// OTLP, when set with Commit, exports each sampled write's spans of
	// this member over OTLP gRPC (package otlp; serve --otlp-endpoint).
	// It needs EtcdEndpoints: the span IDs derive from the cluster and
	// member ids.
	OTLP *otlp.Config
	// Sched: the fsync tracer was loaded with the scheduler programs
	// (serve --sched), so each call's "other" time is split into
	// etcdscope_fsync_other_state_duration_seconds.
	Sched bool
}

// health is what /healthz reports: each loop's fatal error, if any, and
// the records each tracer could not decode (counted, not fatal: the
// pipeline goes on).
type health struct {
	mu      sync.Mutex
	errs    map[string]error
	decode  map[string]uint64
	lastErr map[string]error
}

// decodeError counts one record the named tracer could not decode.
func (h *health) decodeError(what string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.decode == nil {
		h.decode, h.lastErr = map[string]uint64{}, map[string]error{}
	}
	h.decode[what]++
	h.lastErr[what] = err
}

func (h *health) fail(what string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.errs == nil {
		h.errs = map[string]error{}
	}
	h.errs[what] = err
}

func (h *health) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.errs) == 0 {
		fmt.Fprintln(w, "ok")
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
		for what, err := range h.errs {
			fmt.Fprintf(w, "%s: %v\n", what, err)
		}
	}
	for what, n := range h.decode {
		fmt.Fprintf(w, "%s: %d record(s) not decoded, the last: %v\n", what, n, h.lastErr[what])
	}
}

// NewHandler returns the HTTP mux of the exporter: /metrics (text or
// protobuf, as the scraper negotiates; protobuf carries the native
// histograms; gathered one at a time, at most once per ScrapeCacheTTL and
// format) and /healthz, GET and
// HEAD only (405 otherwise).
func NewHandler(reg *prometheus.Registry, healthz http.Handler) http.Handler {
	return newHandler(reg, healthz, nil)
}

// newHandler is NewHandler, with /commit/entries when entries is set
// (serve --commit-pid: the per-entry records, entriesHandler).
func newHandler(reg *prometheus.Registry, healthz http.Handler, entries *commit.EntryLog) http.Handler {
	mux := http.NewServeMux()
	paths := "/metrics, /healthz"
	if entries != nil {
		mux.Handle("/commit/entries", entriesHandler(entries))
		paths += ", /commit/entries"
	}
	mux.Handle("/metrics", cacheScrapes(promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true, Registry: reg}), ScrapeCacheTTL))
	mux.Handle("/healthz", healthz)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "etcdscope exporter: "+paths)
	})
	return onlyGetHead(mux)
}

// Tracer is what serve needs of any tracer besides its events: the
// self-metrics (Source), its probes, and what its session needs to stop
// it (pipeline.Stoppable: Drain, then Close, idempotent).
type Tracer interface {
	Source
	Probes() []event.Probe
	Drain() error
	Close() error
}

// FsyncTracer is the fsync tracer as serve reads it (tracer.FsyncTracer).
type FsyncTracer interface {
	Tracer
	pipeline.FsyncSource
}

// PeersTracer is the peers tracer as serve reads it (tracer.PeersTracer).
type PeersTracer interface {
	Tracer
	pipeline.PeerSource
}

// Run feeds the events of cfg.Fsync and cfg.Peers through their pipelines
// to the metrics and serves cfg.Listener until ctx ends; it closes both
// tracers before it returns. A pipeline that fails turns /healthz to 503
// and ends Run with its error.
func Run(ctx context.Context, cfg Config) error {
	logw := cfg.Log
	if logw == nil {
		logw = os.Stderr
	}
	if cfg.CompareWindow <= 0 {
		cfg.CompareWindow = DefaultCompareWindow
	}
	m := NewMetrics()
	if len(cfg.KeepComms) == 0 {
		cfg.KeepComms = []string{"etcd"}
	}
	m.KeepComms(cfg.KeepComms...)
	if cfg.PodLabels {
		m.EnablePodLabels(NewPodResolver("/proc"))
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m, NewBuildInfo(buildinfo.Get()), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// The session owns the fsync and peers tracers from here: it drains
	// and closes them on every path (the commit tracer runs in a session
	// of its own, runCommit, which ends when etcd exits while serve goes
	// on).
	ft, pt := cfg.Fsync, cfg.Peers
	sess := pipeline.NewSession(ctx, 0, "")
	defer sess.Close()
	sess.Add("fsync", ft)
	sess.Add("peers", pt)
	attached := 0
	for _, p := range ft.Probes() {
		if p.Attached {
			attached++
		}
	}
	for _, u := range analysis.UnavailableProbes(ft.Probes()) {
		what, why := render.UnavailableWords(u)
		fmt.Fprintf(logw, "etcdscope serve: not attached: %s (%s)\n", what, why)
	}
	m.AddSource("fsync", ft, attached)
	defer m.RemoveSource("fsync")

	m.AddSource("peers", pt, len(pt.Probes())) // all attached once NewPeers returns
	defer m.RemoveSource("peers")

	ctx, cancel := context.WithCancel(sess.Context())
	defer cancel()
	every := cfg.LossLogEvery
	if every <= 0 {
		every = LossLogEvery
	}
	lossNames, lossSrcs := []string{"fsync", "peers"}, []Source{ft, pt}
	var cm *CommitMetrics
	var cl *commitLives
	var sl *syncLives
	var duty *pipeline.DutyState
	var entries *commit.EntryLog
	commitOn := cfg.Commit != nil || cfg.CommitNext != nil
	if commitOn {
		entries = commit.NewEntryLog(0)
		if cfg.Commit != nil {
			defer cfg.Commit.Close()
		}
		cl, sl = newCommitLives(cfg.Commit), newSyncLives(cfg.CommitSyncs)
		// NewCommit attached the probes: the account starts attached
		// (without a first etcd, nothing is). Outside a window they come
		// off before serve says it is ready, so that ready means the
		// probes the duty wants now are in place: the detach (the thread
		// probes' tracepoints one after another, ~0.5 s, over 1 s at load
		// 10) then never runs into the first window's attach.
		attached := cfg.Commit != nil
		if on, _ := cfg.CommitDuty.At(time.Now()); attached && !on {
			if err := dutySource(cfg.Commit, cfg.CommitSyncs).Detach(); err != nil {
				fmt.Fprintf(logw, "etcdscope serve: commit: detaching outside a window: %v (tried again at the next edge)\n", err)
			} else {
				attached = false
			}
		}
		duty = pipeline.NewDutyState(attached, nil)
		cm = NewCommitMetrics(cl, cfg.CommitSampleEvery, duty, cfg.CommitDuty.Fraction())
		reg.MustRegister(cm)
		// Each life's tracers, read through the lives (their counts
		// monotonic across etcd's restarts); the fsync tracer on etcd's
		// losses and missed runs are the causes' holes: counted and
		// logged as every tracer's are.
		m.AddSource("commit", cl, 0)
		defer m.RemoveSource("commit")
		m.AddSource("commit_fsync", sl, 0)
		defer m.RemoveSource("commit_fsync")
		lossNames, lossSrcs = append(lossNames, "commit", "commit_fsync"), append(lossSrcs, cl, sl)
	}
	var spans *otlp.Sink
	if commitOn && cfg.OTLP != nil {
		oc := *cfg.OTLP
		oc.Log = logw
		var err error
		if spans, err = otlp.New(oc, entries); err != nil {
			return err
		}
		reg.MustRegister(spans.Collector())
		spans.Start()
	}
	go logLoss(ctx, logw, every, cfg.RingBytes, lossNames, lossSrcs)
	h := &health{}
	// The first failure of a part that is not a tracer's loop (the
	// commit run, the HTTP server) ends the loop phase too.
	var failed failure
	var wg sync.WaitGroup
	if cm != nil {
		wg.Go(func() {
			if err := followCommit(ctx, cfg, cl, sl, duty, cm, entries, spans, logw); err != nil {
				h.fail("commit tracer", err)
				failed.set(fmt.Errorf("commit tracer: %w", err))
			}
		})
	}
	var win *peerWindow // peer events kept for the etcd comparison, if any
	if len(cfg.EtcdMetrics) > 0 {
		win = newPeerWindow(2 * cfg.CompareWindow)
	}
	sess.Go(func() error {
		fp := pipeline.NewFsyncLoop(pipeline.FsyncLoopConfig{Sinks: []pipeline.FsyncSink{m}, Sched: cfg.Sched, OnDecodeError: func(err error) {
			m.DecodeError("fsync")
			h.decodeError("fsync tracer", err)
		}})
		if err := fp.Run(ft); err != nil {
			h.fail("fsync tracer", err)
			return fmt.Errorf("fsync tracer: %w", err)
		}
		return nil
	})
	sess.Go(func() error {
		sinks := []pipeline.PeerSink{m}
		if win != nil {
			sinks = append(sinks, win)
		}
		pp := pipeline.NewPeers(pipeline.PeersConfig{Sinks: sinks, OnDecodeError: func(err error) {
			m.DecodeError("peers")
			h.decodeError("peers tracer", err)
		}})
		if err := pp.Run(pt); err != nil {
			h.fail("peers tracer", err)
			return fmt.Errorf("peers tracer: %w", err)
		}
		return nil
	})
	for _, u := range cfg.EtcdMetrics {
		wg.Add(1)
		go func() {
			defer wg.Done()
			watchEtcd(ctx, u, cfg.EtcdEndpoints, cfg.EtcdTLS, cfg.CompareWindow, m, win, logw)
		}()
	}

	srv, ln := newServer(newHandler(reg, h, entries), cfg.Listener)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			failed.set(fmt.Errorf("serving %s: %w", cfg.Listener.Addr(), err))
		}
	}()
	if cfg.Ready != nil {
		cfg.Ready()
	}
	err := errors.Join(sess.Wait(pipeline.WaitOptions{Done: failed.done()}), failed.err())
	// The spans' last export runs beside the rest of the shutdown.
	spansDone := make(chan struct{})
	go func() {
		defer close(spansDone)
		if spans != nil {
			stopSpans(spans, logw)
		}
	}()
	// No scrape reads a tracer after this; then, all at once (each waits
	// on its own: scrapes in flight, the kernel's detach of each tracer's
	// probes): the server's shutdown (a client still reading gets
	// ServerShutdown to finish, then its connection is cut), the
	// session's finish (drain, wait for the loops, close) and the commit
	// run's (its own session, ended with ctx).
	m.RemoveSource("fsync")
	m.RemoveSource("peers")
	m.RemoveSource("commit")
	m.RemoveSource("commit_fsync")
	srvDone := make(chan struct{})
	go func() {
		defer close(srvDone)
		sctx, scancel := context.WithTimeout(context.Background(), ServerShutdown)
		defer scancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	}()
	cancel() // the commit run and the etcd watchers
	if ferr := sess.Finish(nil); err == nil {
		err = ferr
	}
	wg.Wait()
	<-srvDone
	<-spansDone
	return err
}

// ServerShutdown bounds the wait for scrapes in flight at exit (then
// their connections are closed), so that serve exits within 2 s of
// SIGINT or SIGTERM.
const ServerShutdown = 500 * time.Millisecond

// failure is the first error of one of serve's parts that is not a
// tracer's loop; done closes with it.
type failure struct {
	mu    sync.Mutex
	first error
	ch    chan struct{}
}

func (f *failure) done() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ch == nil {
		f.ch = make(chan struct{})
	}
	return f.ch
}

func (f *failure) set(err error) {
	f.done()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.first == nil {
		f.first = err
		close(f.ch)
	}
}

func (f *failure) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first
}

// SpansShutdown bounds the OTLP sink's last export at exit, so that serve
// still exits within 2 s of SIGINT or SIGTERM.
const SpansShutdown = time.Second

// stopSpans makes the spans of what the sink has left and exports them,
// for SpansShutdown at most; what it could not is said in one line.
func stopSpans(s *otlp.Sink, logw io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), SpansShutdown)
	defer cancel()
	if n, err := s.Shutdown(ctx); n > 0 || err != nil {
		fmt.Fprintf(logw, "etcdscope serve: otlp: %d spans not exported at exit (%v)\n", n, err)
	}
}

// peerWindow keeps the peer events of the last keep nanoseconds for the
// comparison with etcd's metric.
type peerWindow struct {
	mu     sync.Mutex
	keepNs uint64
	events []event.Peer
}

func newPeerWindow(keep time.Duration) *peerWindow {
	return &peerWindow{keepNs: uint64(keep)}
}

// Peer keeps e (a pipeline sink).
func (w *peerWindow) Peer(e *event.Peer) error {
	w.add(*e)
	return nil
}

func (w *peerWindow) add(e event.Peer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, e)
	if n := len(w.events); n > 0 && n%1024 == 0 {
		w.trimLocked(e.TimeNs)
		if len(w.events) > MaxPeerWindowEvents {
			// A flood of connections to the peer port: keep the newest
			// half; the comparison covers less than its window.
			w.events = append(w.events[:0:0], w.events[len(w.events)/2:]...)
		}
	}
}

// MaxPeerWindowEvents bounds the peer events serve keeps for the etcd
// comparison (~150 bytes each: ~15 MB). A member with its peers makes a
// few hundred events a minute; only a flood of connections reaches it.
const MaxPeerWindowEvents = 100_000

func (w *peerWindow) trimLocked(nowNs uint64) {
	if nowNs < w.keepNs {
		return
	}
	cut := nowNs - w.keepNs
	i := 0
	for i < len(w.events) && w.events[i].TimeNs < cut {
		i++
	}
	w.events = append(w.events[:0:0], w.events[i:]...)
}

// between returns the events with fromNs <= TimeNs < toNs.
func (w *peerWindow) between(fromNs, toNs uint64) []event.Peer {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.trimLocked(toNs)
	var out []event.Peer
	for _, e := range w.events {
		if e.TimeNs >= fromNs && e.TimeNs < toNs {
			out = append(out, e)
		}
	}
	return out
}
