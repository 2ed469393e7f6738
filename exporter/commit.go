package exporter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/exporter/otlp"
	"github.com/etcdscope/etcdscope/pipeline"
	"github.com/etcdscope/etcdscope/render"
)

// CommitTracer is the commit tracer as serve reads it
// (tracer.CommitTracer: uprobes on one etcd process's Go functions).
type CommitTracer interface {
	Tracer
	pipeline.CommitSource
	// Attach and Detach put the probes on and take them off, the
	// programs and maps kept (serve --commit-duty).
	pipeline.Switchable
	// WritesCut counts the followed writes a Detach cut short
	// (tracer.CommitCounts.WritesCut).
	WritesCut() uint64
}

// CommitSyncTracer is the fsync tracer on the traced etcd alone
// (tracer.FsyncTracer), read beside the commit tracer.
type CommitSyncTracer interface {
	Tracer
	pipeline.SyncSource
	// DetachThreadProbes and AttachThreadProbes take off and put back
	// the probes it runs at etcd's every write(2) and context switch
	// (tracer.FsyncTracer's): serve --commit-duty switches them with
	// the commit probes.
	DetachThreadProbes() error
	AttachThreadProbes() error
}

// threadProbes is a CommitSyncTracer's thread probes as a
// pipeline.Switchable.
type threadProbes struct{ t CommitSyncTracer }

func (p threadProbes) Attach() error { return p.t.AttachThreadProbes() }
func (p threadProbes) Detach() error { return p.t.DetachThreadProbes() }

// dutySource is what serve --commit-duty switches: the commit probes and,
// inside them, the thread probes of the fsync tracer on etcd (syncs, if
// any), on only while the commit probes are (the write-family syscall
// tracepoints tax every syscall on the host while attached).
func dutySource(c pipeline.Switchable, syncs CommitSyncTracer) pipeline.Switchable {
	if syncs == nil {
		return c
	}
	return pipeline.Nested(c, threadProbes{syncs})
}

// MaxVoteLabels bounds the vote label of etcdscope_commit_deciding_vote_total:
// "local_wal" and one value per follower. A cluster has at most a few
// voters (etcd recommends 3 to 7); anything past the bound is "other".
const MaxVoteLabels = 16

// CommitMetrics are serve's metrics of etcd's writes, the same split
// `etcdscope commit` prints (analysis/commit): one observation per write
// (per part) as each write is resolved. Safe for concurrent use.
type CommitMetrics struct {
	src        WriteCounts // the writes seen, sampled and cut, read at scrape time
	duty       *pipeline.DutyState
	seen       *prometheus.Desc
	sampled    *prometheus.Desc
	cut        *prometheus.Desc
	attached   *prometheus.Desc
	attachedS  *prometheus.Desc
	every      prometheus.Gauge
	fraction   prometheus.Gauge
	duration   *prometheus.HistogramVec
	part       *prometheus.HistogramVec
	walSync    *prometheus.HistogramVec
	vote       *prometheus.CounterVec
	incomplete prometheus.Counter
	batched    prometheus.Counter
	follower   *prometheus.HistogramVec // a follower's receive-to-answer per entry, by part
	ack        *prometheus.HistogramVec // the leader's send to each follower's ack, per write

	exits prometheus.Counter // etcd processes whose writes were followed until they exited

	mu    sync.Mutex
	votes map[string]bool // vote label values exported so far, for MaxVoteLabels
}

// WriteCounts gives the writes the commit tracer saw enter etcd, those
// it followed (pipeline.CommitSource's Writes) and those a duty cycle's
// detach cut short.
type WriteCounts interface {
	Writes() (seen, sampled, dropped uint64, err error)
	WritesCut() uint64
}

// sampledHelp is said in the Help of every metric that counts writes.
const sampledHelp = " Sampled, attached time only: docs/metrics.md scales it."

// attachedHelp is said in the Help of the counts the duty cycle thins.
const attachedHelp = " Attached time only: divide by commit_attached_seconds_total."

// NewCommitMetrics creates the collectors of the commit split of the
// writes src follows, 1 in sampleEvery (0 and 1: every write), attached
// as duty's account says (a duty cycle's, or always).
func NewCommitMetrics(src WriteCounts, sampleEvery uint32, duty *pipeline.DutyState, fraction float64) *CommitMetrics {
	every := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "commit_sample_every",
		Help: "The commit tracer follows 1 write in this many (serve --commit-sample; 1: every write), decided in the kernel at each write's entry, per CPU.",
	})
	every.Set(float64(max(sampleEvery, 1)))
	frac := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "commit_duty_fraction",
		Help: "The share of time the commit tracer's probes are meant to be attached: ON/PERIOD of serve --commit-duty (1: always).",
	})
	frac.Set(fraction)
	return &CommitMetrics{
		src: src, every: every, duty: duty, fraction: frac,
		seen: prometheus.NewDesc(Namespace+"_commit_writes_seen_total",
			"Writes that entered etcd's write function (processInternalRaftRequestOnce) on the traced member, sampled or not, failed ones included."+attachedHelp, nil, nil),
		sampled: prometheus.NewDesc(Namespace+"_commit_writes_sampled_total",
			"Of commit_writes_seen_total, those followed (1 in commit_sample_every): the commit_* histograms and counters observe those applied."+attachedHelp, nil, nil),
		cut: prometheus.NewDesc(Namespace+"_commit_writes_cut_total",
			"Of commit_writes_sampled_total, the writes still in progress when the probes were detached at a window's end (serve --commit-duty): never observed.", nil, nil),
		attached: prometheus.NewDesc(Namespace+"_commit_attached",
			"1 while the commit tracer's probes are attached to etcd, 0 while a duty cycle has them detached (serve --commit-duty).", nil, nil),
		attachedS: prometheus.NewDesc(Namespace+"_commit_attached_seconds_total",
			"Time the commit tracer's probes have been attached (serve --commit-duty: the windows; else since serve started): the denominator of a rate of writes per attached second.", nil, nil),
		duration: durationHistogram("commit_duration_seconds",
			"Server-side time of each etcd write on the traced member, entry to return of its write function or unary gRPC call (docs/commit.md)."+sampledHelp,
			"role"),
		part: durationHistogram("commit_part_duration_seconds",
			"Time of each etcd write in one part of its critical path (docs/commit.md); a write's parts sum to its commit_duration_seconds."+sampledHelp,
			"role", "part"),
		walSync: durationHistogram("commit_wal_sync_duration_seconds",
			"etcd's (*WAL).sync in each write's WAL append: write(2), then fdatasync (etcd_disk_wal_fsync_duration_seconds: the fdatasync alone)."+sampledHelp),
		vote: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "commit_deciding_vote_total",
			Help: "Leader's writes by the deciding vote: local_wal (its own WAL append came last) or the follower whose ack made the quorum (name, else hex id)." + sampledHelp,
		}, []string{"vote"}),
		incomplete: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "commit_incomplete_writes_total",
			Help: "Writes with a part not joined (its probe did not fire or its event was lost); their measured parts are observed." + sampledHelp,
		}),
		batched: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "commit_batched_writes_total",
			Help: "Writes that shared their WAL Save with others (one Ready): their WAL parts are the batch's." + sampledHelp,
		}),
		follower: durationHistogram("commit_follower_entry_duration_seconds",
			"Follower only: each Raft entry, the leader's MsgApp arriving to this member's answer (part=total), and its parts: queue, wal_append (of which wal_sync: write + fdatasync), respond. Attached time only.",
			"part"),
		ack: durationHistogram("commit_follower_ack_duration_seconds",
			"Leader only: each write's Send of its entry to each follower's MsgAppResp covering it (RTT + that follower's receive-to-answer), by follower."+sampledHelp,
			"follower"),
		exits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "commit_etcd_exits_total",
			Help: "etcd processes the commit tracer followed until they exited; with serve --commit-comm it then follows the next process of that comm, without it the split stops.",
		}),
		votes: map[string]bool{},
	}
}

// ObserveFollowerEntry records one entry this member, a follower,
// received, saved and answered (a pipeline.CommitOptions.OnFollowerEntry
// callback).
func (c *CommitMetrics) ObserveFollowerEntry(s commit.FollowerSplit) {
	for _, p := range []struct {
		part string
		ns   int64
	}{{"total", s.TotalNs}, {"queue", s.QueueNs}, {commit.PartWALAppend, s.WALNs}, {"wal_sync", s.FdatasyncNs}, {"respond", s.RespondNs}} {
		c.follower.WithLabelValues(p.part).Observe(float64(p.ns) / 1e9)
	}
}

func (c *CommitMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.duration, c.part, c.walSync, c.vote, c.incomplete, c.batched, c.follower, c.ack, c.exits}
}

// Describe implements prometheus.Collector.
func (c *CommitMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, x := range c.collectors() {
		x.Describe(ch)
	}
	c.every.Describe(ch)
	c.fraction.Describe(ch)
	ch <- c.seen
	ch <- c.sampled
	ch <- c.cut
	ch <- c.attached
	ch <- c.attachedS
}

// Collect implements prometheus.Collector.
func (c *CommitMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, x := range c.collectors() {
		x.Collect(ch)
	}
	c.every.Collect(ch)
	c.fraction.Collect(ch)
	if c.duty != nil {
		on, total := c.duty.Attached()
		ch <- prometheus.MustNewConstMetric(c.attached, prometheus.GaugeValue, b2f(on))
		ch <- prometheus.MustNewConstMetric(c.attachedS, prometheus.CounterValue, total.Seconds())
	}
	if c.src == nil {
		return
	}
	if seen, sampled, _, err := c.src.Writes(); err == nil {
		ch <- prometheus.MustNewConstMetric(c.seen, prometheus.CounterValue, float64(seen))
		ch <- prometheus.MustNewConstMetric(c.sampled, prometheus.CounterValue, float64(sampled))
		ch <- prometheus.MustNewConstMetric(c.cut, prometheus.CounterValue, float64(c.src.WritesCut()))
	}
}

// ObserveWrite records one resolved write (a pipeline.CommitOptions.OnWrite
// callback); names turns follower ids into member names.
func (c *CommitMetrics) ObserveWrite(w *commit.Write, names commit.Names) error {
	role := string(w.Role)
	if role == "" {
		role = "unknown"
	}
	c.duration.WithLabelValues(role).Observe(float64(w.TotalNs()) / 1e9)
	for _, p := range commit.PartOrder {
		if v, ok := w.PartsNs[p]; ok {
			c.part.WithLabelValues(role, p).Observe(float64(v) / 1e9)
		}
	}
	if _, ok := w.PartsNs[commit.PartWALAppend]; ok && w.WALSyncNs >= 0 {
		c.walSync.WithLabelValues().Observe(float64(w.WALSyncNs) / 1e9)
	}
	if len(w.Missing) > 0 {
		c.incomplete.Inc()
	}
	if w.BatchEntries > 1 {
		c.batched.Inc()
	}
	if w.DeciderKnown {
		c.vote.WithLabelValues(c.voteLabel(w.Decider, names)).Inc()
	}
	for _, a := range w.Acks {
		c.ack.WithLabelValues(c.voteLabel(a.Member, names)).Observe(float64(a.AfterSendNs) / 1e9)
	}
	return nil
}

// voteLabel names a deciding vote, bounded by MaxVoteLabels.
func (c *CommitMetrics) voteLabel(id uint64, names commit.Names) string {
	v := "local_wal"
	if id != commit.LocalVote {
		v = names[id]
		if v == "" {
			v = strconv.FormatUint(id, 16)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.votes[v] {
		if len(c.votes) >= MaxVoteLabels {
			return OtherLabel
		}
		c.votes[v] = true
	}
	return v
}

// CommitLife is the commit tracer on one etcd process's life and what
// goes with it (Config's Commit, CommitPID, CommitUnavailable and
// CommitSyncs): Config.CommitNext's result.
type CommitLife struct {
	Commit      CommitTracer
	PID         int
	Unavailable []analysis.Unavailable
	Syncs       CommitSyncTracer // nil when the fsync tracer on etcd did not start
}

// followCommit runs the commit tracer until ctx ends; when its etcd
// exits and cfg.CommitNext is set, it waits for the next etcd of
// cfg.CommitComm and goes on with its tracers, into the same metrics and
// entry window (entries are keyed by Raft term and index, which a
// restarted member keeps). Without a first etcd (cfg.Commit nil: serve
// --commit-comm started before it), it waits for one the same way.
// Each process of cfg.CommitComm it follows, the one running at the
// start too, is said once by its name and pid.
func followCommit(ctx context.Context, cfg Config, cl *commitLives, sl *syncLives, duty *pipeline.DutyState, c *CommitMetrics, entries *commit.EntryLog, spans *otlp.Sink, logw io.Writer) error {
	following := func(pid int) {
		fmt.Fprintf(logw, "etcdscope serve: commit: following %s pid %d\n", cfg.CommitComm, pid)
	}
	// follow waits for the next etcd and takes its tracers; false: ctx
	// ended first.
	follow := func() (bool, error) {
		life, err := cfg.CommitNext(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return false, nil
			}
			return false, err
		}
		cfg.Commit, cfg.CommitPID, cfg.CommitUnavailable, cfg.CommitSyncs = life.Commit, life.PID, life.Unavailable, life.Syncs
		cl.next(life.Commit, true)
		sl.next(life.Syncs, life.Syncs != nil)
		duty.SetAttached(true) // NewCommit attached its probes; RunDuty detaches them outside a window
		following(life.PID)
		return true, nil
	}
	switch {
	case cfg.Commit == nil:
		fmt.Fprintf(logw, "etcdscope serve: commit: waiting for a process named %s\n", cfg.CommitComm)
		if ok, err := follow(); !ok {
			return err
		}
	case cfg.CommitComm != "":
		following(cfg.CommitPID) // found at the start (serve's etcdPID)
	}
	for {
		// The duty cycle switches this life's tracer, and stops with its
		// run (etcd exited: nothing to attach to) or with serve.
		dctx, dcancel := context.WithCancel(ctx)
		dutyDone := make(chan struct{})
		go func() {
			defer close(dutyDone)
			pipeline.RunDuty(dctx, dutySource(cfg.Commit, cfg.CommitSyncs), pipeline.DutyOptions{Duty: cfg.CommitDuty, State: duty, OnError: func(attach bool, err error) {
				what := "detaching at the window's end"
				if attach {
					what = "attaching at the window's start"
				}
				fmt.Fprintf(logw, "etcdscope serve: commit: %s: %v (tried again at the next edge)\n", what, err)
			}})
		}()
		res, err := runCommit(ctx, cfg, c, entries, spans, logw)
		dcancel()
		<-dutyDone
		if err != nil || !res.Target.Exited || ctx.Err() != nil {
			return err
		}
		duty.SetAttached(false) // no etcd, nothing attached
		cl.end(res)
		sl.end(res)
		c.exits.Inc()
		if cfg.CommitNext == nil {
			fmt.Fprintf(logw, "etcdscope serve: commit: etcd pid %d exited: its writes are no longer traced (restart serve with the new pid, or give --commit-comm to follow etcd across restarts)\n", cfg.CommitPID)
			return nil
		}
		fmt.Fprintf(logw, "etcdscope serve: commit: etcd pid %d exited: waiting for the next process named %s\n", cfg.CommitPID, cfg.CommitComm)
		if ok, err := follow(); !ok {
			return err
		}
	}
}

// runCommit traces cfg.Commit's writes into c until ctx ends or etcd
// exits: the same run as `etcdscope commit` (pipeline.RunCommit, in a
// session of its own that drains and closes cfg.Commit) without a
// duration, with --etcd-endpoints giving the member names and the role.
func runCommit(ctx context.Context, cfg Config, c *CommitMetrics, entries *commit.EntryLog, spans *otlp.Sink, logw io.Writer) (*pipeline.CommitResult, error) {
	s := pipeline.NewSession(ctx, 0, "")
	defer s.Close()
	s.Add("commit", cfg.Commit)
	opt := pipeline.CommitOptions{
		PID: cfg.CommitPID, Endpoints: cfg.EtcdEndpoints, TLS: cfg.EtcdTLS,
		Source: cfg.Commit, Unavailable: cfg.CommitUnavailable, RingBytes: cfg.RingBytes, SampleEvery: cfg.CommitSampleEvery,
		Notice:  func(n commit.Notice) { fmt.Fprintf(logw, "etcdscope serve: commit: %s\n", render.CommitNotice(n)) },
		OnWrite: c.ObserveWrite, Entries: entries, OnFollowerEntry: c.ObserveFollowerEntry,
		ModelScrapeEvery: -1, // serve reports no model
		// At a stop signal nothing reads the last records: no settling.
		StopAtOnce: true,
		// An agent outlives a member still starting (the walk: serve
		// --commit-comm found etcd before its client port answered and
		// exited 1, fsync and peers metrics with it).
		WaitCluster: true,
	}
	if cfg.CommitSyncs != nil {
		s.Add("commit fsync", cfg.CommitSyncs)
		opt.Syncs, opt.EntryCausesOnly = cfg.CommitSyncs, true
	}
	if spans != nil {
		// The sink takes each write without blocking; the entries it
		// reads from the window on its own goroutine.
		opt.OnMember = spans.SetCluster
		opt.OnWrite = func(w *commit.Write, names commit.Names) error {
			spans.Write(w)
			return c.ObserveWrite(w, names)
		}
	}
	res, err := pipeline.RunCommit(s, opt)
	if err != nil {
		return nil, err
	}
	if res.DecodeErrors > 0 {
		fmt.Fprintf(logw, "etcdscope serve: commit: %d ring records could not be decoded\n", res.DecodeErrors)
	}
	return res, nil
}

// Bounds of GET /commit/entries: the records a reply holds by default
// and at most (one record is at most ~600 bytes of JSON).
const (
	EntriesDefaultLimit = 1024
	EntriesMaxLimit     = commit.MaxEntries
)

// entriesHandler serves GET /commit/entries?since_index=N&limit=M: the
// commit tracer's per-entry records with an index above N (0: all kept),
// at most M (default EntriesDefaultLimit, at most EntriesMaxLimit), as
// a commit.EntryWindow. Bad parameters are one line and 400.
func entriesHandler(log *commit.EntryLog) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		since, limit := uint64(0), EntriesDefaultLimit
		if s := q.Get("since_index"); s != "" {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				http.Error(w, fmt.Sprintf("since_index %q: give a Raft index (a whole number)", s), http.StatusBadRequest)
				return
			}
			since = v
		}
		if s := q.Get("limit"); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v < 1 || v > EntriesMaxLimit {
				http.Error(w, fmt.Sprintf("limit %q: give 1 to %d", s, EntriesMaxLimit), http.StatusBadRequest)
				return
			}
			limit = v
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(log.Window(since, limit))
	})
}
