package exporter

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/render"
)

// Namespace prefixes every metric name.
const Namespace = "etcdscope"

// DurationBuckets are the classic bucket upper bounds of every duration
// histogram, seconds: 25 powers of two times etcd's 10 ms WAL fsync
// budget, 10ms/2^13 (1.22 µs) to 10ms*2^11 (20.48 s). One bound is the
// budget itself, so the share of calls under it is a bucket's count, not
// an interpolation; every bound prints as a short decimal (0.00125, not
// 0.0012499999). etcd's disk histograms start at 1 ms; a 50 µs NVMe
// fdatasync needs the lower decades.
var DurationBuckets = prometheus.ExponentialBuckets(0.01/(1<<13), 2, 25)

// FlushCountBuckets are the bucket bounds of the flushes-per-fsync
// histogram (a count of block requests, not a duration).
var FlushCountBuckets = []float64{0, 1, 2, 3, 4, 6, 8, 16, 32}

// Native histogram settings: factor 1.1 (schema 3, 8 buckets per power of
// two), at most 160 buckets per series before the resolution is halved,
// and a reset at most once an hour when the bucket limit is reached.
const (
	nativeFactor   = 1.1
	nativeMaxBkts  = 160
	nativeMinReset = time.Hour
)

func durationHistogram(name, help string, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace:                       Namespace,
		Name:                            name,
		Help:                            help,
		Buckets:                         DurationBuckets,
		NativeHistogramBucketFactor:     nativeFactor,
		NativeHistogramMaxBucketNumber:  nativeMaxBkts,
		NativeHistogramMinResetDuration: nativeMinReset,
	}, labels)
}

// Source is a running tracer as the self-metrics see it: tracer.FsyncTracer
// and tracer.PeersTracer implement it (and a capture's counters in tests).
type Source interface {
	// Lost: events that did not fit in the ring buffer, summed over CPUs.
	Lost() (uint64, error)
	// Missed: program runs the kernel skipped (bpf_prog_info.recursion_misses).
	Missed() uint64
	// ProgramStats: per-program run time and count (kernel.bpf_stats_enabled).
	ProgramStats() []event.ProgramStats
}

// AttachedSource is a Source whose attached programs change while serve
// runs (the commit run's tracers across etcd's lives, none between
// them): read at each scrape in place of AddSource's count.
type AttachedSource interface {
	Source
	ProgramsAttached() int
}

// OwnerSource is a Source that names its connections' processes by a
// background look-up of socket owners (tracer.PeersTracer, through
// host.SocketOwnerResolver): the self-metrics then count the look-ups and
// what they dropped, as the peers JSON's owner_lookups does.
type OwnerSource interface {
	OwnerStats() host.SocketOwnerStats
}

// ownerResults are the result label's values of
// etcdscope_peer_owner_lookups_total, named as the peers JSON's
// owner_lookups fields (etcdmetric.OwnerLookups), with the counter of each.
var ownerResults = []struct {
	name  string
	count func(*host.SocketOwnerStats) uint64
}{
	{"resolved", func(s *host.SocketOwnerStats) uint64 { return s.Resolved }},
	{"unowned", func(s *host.SocketOwnerStats) uint64 { return s.Unowned }},
	{"queue_drops", func(s *host.SocketOwnerStats) uint64 { return s.QueueDrops }},
	{"evicted", func(s *host.SocketOwnerStats) uint64 { return s.Evicted }},
	{"learned_drops", func(s *host.SocketOwnerStats) uint64 { return s.LearnedDrops }},
}

type source struct {
	name     string
	src      Source
	attached int
}

// Metrics holds every etcdscope metric. Observe* methods are safe for
// concurrent use; register Metrics itself (it is a prometheus.Collector).
type Metrics struct {
	fsyncDuration  *prometheus.HistogramVec
	layerDuration  *prometheus.HistogramVec
	otherState     *prometheus.HistogramVec // serve --sched
	flushDuration  *prometheus.HistogramVec
	flushesPer     *prometheus.HistogramVec
	handshakeRTT   *prometheus.HistogramVec
	setup          *prometheus.HistogramVec
	srtt           *prometheus.HistogramVec
	connsOpened    *prometheus.CounterVec
	retransmits    *prometheus.CounterVec
	inflation      *prometheus.GaugeVec
	etcdMean       *prometheus.GaugeVec
	etcdRTT        *prometheus.GaugeVec
	scrapeErrors   *prometheus.CounterVec
	decodeErrors   *prometheus.CounterVec
	stackedFsync   *prometheus.HistogramVec
	stackedLayer   *prometheus.CounterVec
	stackedFlushes *prometheus.CounterVec
	stackedNestIn  *prometheus.CounterVec
	writes         *writeMetrics
	attachedDesc   *prometheus.Desc
	lostDesc       *prometheus.Desc
	missedDesc     *prometheus.Desc
	runSecondsDesc *prometheus.Desc
	runCountDesc   *prometheus.Desc
	statsOnDesc    *prometheus.Desc
	ownerDesc      *prometheus.Desc // etcdscope_peer_owner_lookups_total, of an OwnerSource
	ownerScansDesc *prometheus.Desc

	// fsyncMu guards fsyncSeries, ObserveFsync's cache of the children of
	// the three fsync vectors per label set: hashing five label values for
	// each of seven observations cost more than the observations.
	fsyncMu     sync.Mutex
	fsyncSeries map[fsyncLabels]*fsyncObservers
	// pods, if set (EnablePodLabels), labels fsync_duration_seconds with
	// the calling process's pod and container.
	pods  *PodResolver
	comms map[string]int // label sets per comm (not OtherLabel), for MaxComms
	// keep: the comms the operator asked to watch (KeepComms): never
	// folded into "other", and their pods keep theirs.
	keep map[string]bool

	peerMu   sync.Mutex
	peerSeen map[string]*atomic.Int64 // peer label -> clock at its last event, for MaxPeers
	overflow *prometheus.CounterVec
	clock    coarseClock
	timeNow  func() time.Time // time.Now; tests move it

	mu      sync.Mutex
	sources []source
	// statsEnabled reads kernel.bpf_stats_enabled; tests replace it.
	statsEnabled func() bool
}

// NewMetrics creates the collectors; nothing is exported until a label set
// is first observed, except the self-metrics of added sources.
func NewMetrics() *Metrics {
	m := &Metrics{
		fsyncDuration: durationHistogram("fsync_duration_seconds",
			"Wall time of fsync/fdatasync calls, syscall entry to exit (tracepoints syscalls:sys_enter/exit_f(data)sync).",
			"comm", "device", "fs", "file_kind", "syscall"),
		otherState: durationHistogram("fsync_other_state_duration_seconds",
			"The other layer of each fsync/fdatasync by the calling thread's scheduler state (serve --sched): runnable, running, blocked; a call's states sum to its other layer (docs/metrics.md).",
			"comm", "device", "file_kind", "state"),
		layerDuration: durationHistogram("fsync_layer_duration_seconds",
			"Time of each fsync/fdatasync in one kernel layer (data_writeback, journal, device_flush, block_queue, dm, other); a call's layers sum to its wall time.",
			"comm", "device", "file_kind", "layer"),
		flushDuration: durationHistogram("block_flush_duration_seconds",
			"Issue to completion of block requests that persist a disk's cache (block_rq_issue/complete): kind flush (REQ_OP_FLUSH), preflush (REQ_PREFLUSH write), fua (REQ_FUA-only write).",
			"device", "kind"),
		flushesPer: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "fsync_flush_requests",
			Help:    "Flush requests (REQ_OP_FLUSH, REQ_PREFLUSH or REQ_FUA) each fsync/fdatasync waited on.",
			Buckets: FlushCountBuckets,
		}, []string{"comm", "device", "file_kind"}),
		handshakeRTT: durationHistogram("peer_handshake_rtt_seconds",
			"TCP handshake RTT of connections on etcd's peer port: SYN_SENT to ESTABLISHED for active opens, the kernel's SYN-ACK RTT for passive ones (sock:inet_sock_set_state).",
			"peer", "direction"),
		setup: durationHistogram("peer_setup_seconds",
			"Setup of connections on etcd's peer port: SYN_SENT to the peer's first data (active; a peer stalling after accept shows here), ESTABLISHED to the first request (passive); docs/metrics.md.",
			"peer", "direction"),
		srtt: durationHistogram("peer_srtt_seconds",
			"Kernel smoothed RTT (tcp_sock.srtt_us>>3) of live connections on etcd's peer port, sampled at most once per second per connection (tcp:tcp_probe).",
			"peer"),
		connsOpened: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "peer_connections_opened_total",
			Help: "TCP connections on etcd's peer port that reached ESTABLISHED; etcd's RAFT_MESSAGE prober dials one per probe (15 a minute).",
		}, []string{"peer", "direction"}),
		retransmits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "peer_retransmits_total",
			Help: "TCP segments retransmitted on etcd's peer port (tcp:tcp_retransmit_skb).",
		}, []string{"peer"}),
		inflation: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "etcd_peer_rtt_inflation_ratio",
			Help: "Mean of etcd_network_peer_round_trip_time_seconds over the last comparison window divided by the network RTT traced to that peer (analysis/etcdmetric).",
		}, []string{"etcd", "to", "prober", "peer"}),
		etcdMean: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "etcd_peer_rtt_metric_mean_seconds",
			Help: "Mean of etcd_network_peer_round_trip_time_seconds observations made in the last comparison window (delta of _sum over delta of _count).",
		}, []string{"etcd", "to", "prober", "peer"}),
		etcdRTT: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "etcd_peer_rtt_traced_seconds",
			Help: "The network RTT the inflation ratio divides by: p50 handshake RTT of the member's connections to that peer in the last comparison window.",
		}, []string{"etcd", "to", "prober", "peer"}),
		scrapeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "etcd_metrics_scrape_errors_total",
			Help: "Failed scrapes of an --etcd-metrics URL, or of the member list (--etcd-endpoints) at a comparison.",
		}, []string{"etcd"}),
		decodeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "decode_errors_total",
			Help: "Ring buffer records a tracer could not read or decode (short record, unknown kind); each is an event missing from the metrics.",
		}, []string{"tracer"}),
		stackedFsync: durationHistogram("stacked_fsync_duration_seconds",
			"Wall time of a stacked device's fsyncs by level: upper (the calls), backing (the loop driver's fsyncs of its backing file), dm (a dm target's hold), lower (the disks beneath); docs/metrics.md.",
			"level", "device", "fs"),
		stackedLayer: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "stacked_layer_seconds_total",
			Help: "Time the fsyncs of a stacked level spent in each layer (data_writeback, journal, device_flush, block_queue, dm, other); its share: rate over that of stacked_fsync_duration_seconds_sum.",
		}, []string{"level", "device", "fs", "layer"}),
		stackedFlushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "stacked_flush_requests_total",
			Help: "Flush requests (REQ_OP_FLUSH, REQ_PREFLUSH or REQ_FUA) the fsyncs of a stacked level waited on; over the upper count, the report's flushes/fs column.",
		}, []string{"level", "device", "fs"}),
		stackedNestIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "stacked_nesting_device_flush_seconds_total",
			Help: "Device-flush time of the upper fsyncs whose flushes nested backing fsyncs on this device; backing's fsync _sum over it is the share of upper's device flush spent in them.",
		}, []string{"device", "fs"}),
		attachedDesc: prometheus.NewDesc(Namespace+"_bpf_programs_attached",
			"BPF programs of the tracer attached to their hook.", []string{"tracer"}, nil),
		lostDesc: prometheus.NewDesc(Namespace+"_lost_events_total",
			"Events that did not fit in the tracer's ring buffer (per-CPU lost_events counter summed); alert on any increase.", []string{"tracer"}, nil),
		missedDesc: prometheus.NewDesc(Namespace+"_missed_events_total",
			"Runs of the tracer's BPF programs the kernel skipped (bpf_prog_info.recursion_misses summed): the probe fired, from an interrupt, while a BPF program it cannot nest in ran on that CPU.", []string{"tracer"}, nil),
		runSecondsDesc: prometheus.NewDesc(Namespace+"_bpf_program_run_seconds_total",
			"Time spent in the BPF program (bpf_prog_info.run_time_ns); exported while kernel.bpf_stats_enabled=1 or once BPF_ENABLE_STATS has made the kernel count runs.", []string{"tracer", "program"}, nil),
		runCountDesc: prometheus.NewDesc(Namespace+"_bpf_program_runs_total",
			"Runs of the BPF program (bpf_prog_info.run_cnt); exported while kernel.bpf_stats_enabled=1 or once BPF_ENABLE_STATS has made the kernel count runs.", []string{"tracer", "program"}, nil),
		statsOnDesc: prometheus.NewDesc(Namespace+"_bpf_stats_enabled",
			"The sysctl kernel.bpf_stats_enabled: 1 when the kernel counts BPF run time and runs for every program, else 0 (a BPF_ENABLE_STATS fd can turn counting on without it).", nil, nil),
		ownerDesc: prometheus.NewDesc(Namespace+"_peer_owner_lookups_total",
			"Look-ups of the process holding a peer-port socket by result: resolved, unowned, or dropped (queue_drops, evicted, learned_drops: the owner stays unknown, pid 0); docs/metrics.md.",
			[]string{"result"}, nil),
		ownerScansDesc: prometheus.NewDesc(Namespace+"_peer_owner_scans_total",
			"Full scans of /proc/*/fd for socket owners (host.SocketOwnerResolver; at most 1% of a CPU by default).", nil, nil),
		statsEnabled: host.BPFStatsEnabled,
		overflow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "series_overflow_total",
			Help: "Observations counted under \"other\" because a series bound was reached, by label: comm, fsync_label_set, write_label_set or peer (the bounds: docs/metrics.md).",
		}, []string{"label"}),
		writes:      newWriteMetrics(),
		fsyncSeries: map[fsyncLabels]*fsyncObservers{},
		comms:       map[string]int{},
		peerSeen:    map[string]*atomic.Int64{},
		timeNow:     time.Now,
	}
	m.clock.tick(time.Now())
	return m
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.fsyncDuration, m.layerDuration, m.otherState, m.flushDuration, m.flushesPer,
		m.handshakeRTT, m.setup, m.srtt, m.connsOpened, m.retransmits, m.inflation, m.etcdMean, m.etcdRTT,
		m.scrapeErrors, m.decodeErrors, m.overflow, m.stackedFsync, m.stackedLayer, m.stackedFlushes, m.stackedNestIn,
		m.writes.duration, m.writes.layer}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
	for _, d := range []*prometheus.Desc{m.attachedDesc, m.lostDesc, m.missedDesc, m.runSecondsDesc, m.runCountDesc, m.statsOnDesc, m.ownerDesc, m.ownerScansDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. The self-metrics are read from
// the tracers at scrape time (map lookups and BPF_OBJ_GET_INFO_BY_FD).
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.expire()
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
	m.mu.Lock()
	srcs := append([]source(nil), m.sources...)
	m.mu.Unlock()
	on := m.statsEnabled()
	ch <- prometheus.MustNewConstMetric(m.statsOnDesc, prometheus.GaugeValue, b2f(on))
	for _, s := range srcs {
		attached := s.attached
		if a, ok := s.src.(AttachedSource); ok {
			attached = a.ProgramsAttached()
		}
		ch <- prometheus.MustNewConstMetric(m.attachedDesc, prometheus.GaugeValue, float64(attached), s.name)
		if lost, err := s.src.Lost(); err == nil {
			ch <- prometheus.MustNewConstMetric(m.lostDesc, prometheus.CounterValue, float64(lost), s.name)
		}
		ch <- prometheus.MustNewConstMetric(m.missedDesc, prometheus.CounterValue, float64(s.src.Missed()), s.name)
		if o, ok := s.src.(OwnerSource); ok {
			st := o.OwnerStats()
			for _, r := range ownerResults {
				ch <- prometheus.MustNewConstMetric(m.ownerDesc, prometheus.CounterValue, float64(r.count(&st)), r.name)
			}
			ch <- prometheus.MustNewConstMetric(m.ownerScansDesc, prometheus.CounterValue, float64(st.Scans))
		}
		ps := s.src.ProgramStats()
		if !on && !anyRuns(ps) {
			continue
		}
		for _, p := range ps {
			ch <- prometheus.MustNewConstMetric(m.runSecondsDesc, prometheus.CounterValue, float64(p.RunTimeNs)/1e9, s.name, p.Name)
			ch <- prometheus.MustNewConstMetric(m.runCountDesc, prometheus.CounterValue, float64(p.RunCount), s.name, p.Name)
		}
	}
}

// anyRuns reports whether the kernel counted runs of any program: stats
// were on for a while, through the sysctl or through a BPF_ENABLE_STATS
// file descriptor that some process holds (bpftop does that; the sysctl
// does not show it).
func anyRuns(ps []event.ProgramStats) bool {
	for _, p := range ps {
		if p.RunCount > 0 {
			return true
		}
	}
	return false
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// AddSource makes the self-metrics report a running tracer under the label
// tracer=name ("fsync", "peers"), with attached programs attached.
func (m *Metrics) AddSource(name string, s Source, attached int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sources = append(m.sources, source{name: name, src: s, attached: attached})
}

// RemoveSource stops reporting the tracer added as name (it is closing:
// its maps can no longer be read).
func (m *Metrics) RemoveSource(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, s := range m.sources {
		if s.name == name {
			m.sources = append(m.sources[:i], m.sources[i+1:]...)
			return
		}
	}
}

// DecodeError counts one record the named tracer could not read.
func (m *Metrics) DecodeError(tracerName string) {
	m.decodeErrors.WithLabelValues(tracerName).Inc()
}

// deviceLabel names a device by its kernel name when it has one (vda1),
// else by major:minor (tmpfs and overlay have anonymous devices).
func deviceLabel(name, dev string) string {
	if name != "" {
		return name
	}
	return dev
}

type fsyncLabels struct {
	comm, dev, fs, kind, syscall string
	pod                          PodLabels
}

// labelsOf is the label set of a call, its strings escaped as a
// terminal's are (render.Escape): a comm is any process's to set, and
// Prometheus takes no label value that is not UTF-8 (client_golang
// panicked on a comm with a byte 0xff in it: any local user could end
// serve), nor should a control in one reach the terminal of whoever
// curls /metrics. A clean string (etcd) is its own label.
func labelsOf(comm, devName, dev, fs, kind, syscall string) fsyncLabels {
	return fsyncLabels{comm: render.Escape(comm), dev: render.Escape(deviceLabel(devName, dev)), fs: render.Escape(fs),
		kind: render.Escape(kind), syscall: render.Escape(syscall)}
}

type fsyncObservers struct {
	total, flushes prometheus.Observer
	layers         []prometheus.Observer // in analysis.LayerNames order
	other          []prometheus.Observer // in analysis.SchedNames order; nil until a record has Sched
	seen           atomic.Int64          // clock at the last observation
}

// boundFsyncLocked returns the label set k is counted under: k itself, or
// with comm (then comm, device and fs) OtherLabel when MaxComms (then
// MaxFsyncLabelSets) is reached. m.fsyncMu is held.
func (m *Metrics) boundFsyncLocked(k fsyncLabels) fsyncLabels {
	if m.keep[k.comm] {
		// What the operator watches is never folded: its label sets are
		// few (devices × files kinds × syscalls × MaxPodSeries pods).
		return k
	}
	if k.comm != OtherLabel && m.comms[k.comm] == 0 && len(m.comms) >= MaxComms {
		k.comm = OtherLabel
		m.overflow.WithLabelValues("comm").Inc()
	}
	if m.fsyncSeries[k] == nil && len(m.fsyncSeries) >= MaxFsyncLabelSets {
		k.comm, k.dev, k.fs = OtherLabel, OtherLabel, OtherLabel
		m.overflow.WithLabelValues("fsync_label_set").Inc()
	}
	return k
}

// peerLabel returns the peer label value for peer: itself, or OtherLabel
// once MaxPeers others are exported; it marks the peer seen.
func (m *Metrics) peerLabel(peer string) string {
	m.peerMu.Lock()
	defer m.peerMu.Unlock()
	seen := m.peerSeen[peer]
	if seen == nil {
		if len(m.peerSeen) >= MaxPeers {
			peer = OtherLabel
			m.overflow.WithLabelValues("peer").Inc()
			if seen = m.peerSeen[peer]; seen != nil {
				seen.Store(m.clock.now())
				return peer
			}
		}
		seen = new(atomic.Int64)
		m.peerSeen[peer] = seen
	}
	seen.Store(m.clock.now())
	return peer
}

// labelTriple is the labels the layer and flush histograms have.
type labelTriple struct{ comm, dev, kind string }

func (k fsyncLabels) triple() labelTriple { return labelTriple{k.comm, k.dev, k.kind} }

// staleSeries returns the label sets of series that old says are stale,
// and the triples of those that stay.
func staleSeries(series map[fsyncLabels]*fsyncObservers, old func(seen int64) bool) (gone []fsyncLabels, live map[labelTriple]bool) {
	live = map[labelTriple]bool{}
	for k, o := range series {
		if old(o.seen.Load()) {
			gone = append(gone, k)
		} else {
			live[k.triple()] = true
		}
	}
	return gone, live
}

// expire deletes the series not observed for SeriesTTL: fsync label sets
// and peers not seen since the previous scrape and older than the TTL.
// Collect calls it at each scrape, then advances the clock.
func (m *Metrics) expire() {
	prev := m.clock.now()
	now := m.clock.tick(m.timeNow())
	old := func(seen int64) bool { return seen != prev && expired(seen, now) }

	m.fsyncMu.Lock()
	gone, live := staleSeries(m.fsyncSeries, old)
	for _, k := range gone {
		delete(m.fsyncSeries, k)
		if m.pods == nil {
			m.fsyncDuration.DeleteLabelValues(k.comm, k.dev, k.fs, k.kind, k.syscall)
		} else {
			m.fsyncDuration.DeleteLabelValues(k.comm, k.dev, k.fs, k.kind, k.syscall, k.pod.PodUID, k.pod.ContainerID)
		}
		if !live[k.triple()] { // no other label set shares them
			m.flushesPer.DeleteLabelValues(k.comm, k.dev, k.kind)
			for _, l := range analysis.LayerNames {
				m.layerDuration.DeleteLabelValues(k.comm, k.dev, k.kind, l)
			}
			for _, st := range analysis.SchedNames {
				m.otherState.DeleteLabelValues(k.comm, k.dev, k.kind, st)
			}
		}
		if k.comm != OtherLabel {
			if m.comms[k.comm]--; m.comms[k.comm] <= 0 {
				delete(m.comms, k.comm)
			}
		}
	}
	m.fsyncMu.Unlock()
	m.writes.expire(old)

	m.peerMu.Lock()
	for p, seen := range m.peerSeen {
		if old(seen.Load()) {
			delete(m.peerSeen, p)
			for _, v := range []interface {
				DeletePartialMatch(prometheus.Labels) int
			}{m.handshakeRTT, m.setup, m.srtt, m.connsOpened, m.retransmits} {
				v.DeletePartialMatch(prometheus.Labels{"peer": p})
			}
		}
	}
	m.peerMu.Unlock()
}

// KeepComms names the comms whose series the bounds never fold into
// "other" (serve: its --comm and --commit-comm, else etcd): any local user
// names its processes as it likes, and 16 one-shot ones must not take
// etcd's place. Call it before the first observation.
func (m *Metrics) KeepComms(comms ...string) {
	m.fsyncMu.Lock()
	defer m.fsyncMu.Unlock()
	m.keep = map[string]bool{}
	for _, c := range comms {
		if c != "" && c != OtherLabel {
			m.keep[render.Escape(c)] = true // as labelsOf has it
		}
	}
}

// ObserveFsync records one attributed fsync: its wall time, each layer's
// share and the flush requests it waited on.
func (m *Metrics) ObserveFsync(r *analysis.FsyncRecord) {
	k := labelsOf(r.Comm, r.DevName, r.Dev, r.FS, r.FileKind, r.Syscall)
	if m.pods != nil { // set before the first observation; a file read, outside fsyncMu
		k.pod = m.pods.Lookup(r.PID, m.keep[k.comm])
	}
	m.fsyncMu.Lock()
	o := m.fsyncSeries[k]
	if o == nil {
		k = m.boundFsyncLocked(k)
		o = m.fsyncSeries[k]
	}
	if o == nil {
		o = &fsyncObservers{
			total:   m.fsyncDurationObserver(k.comm, k.dev, k.fs, k.kind, k.syscall, k.pod),
			flushes: m.flushesPer.WithLabelValues(k.comm, k.dev, k.kind),
		}
		for _, l := range analysis.LayerNames {
			o.layers = append(o.layers, m.layerDuration.WithLabelValues(k.comm, k.dev, k.kind, l))
		}
		m.fsyncSeries[k] = o
		if k.comm != OtherLabel {
			m.comms[k.comm]++
		}
	}
	m.fsyncMu.Unlock()
	o.seen.Store(m.clock.now())
	o.total.Observe(float64(r.TotalNs) / 1e9)
	for i, l := range analysis.LayerNames {
		o.layers[i].Observe(float64(r.Layers.Get(l)) / 1e9)
	}
	if r.Sched != nil {
		m.fsyncMu.Lock()
		if o.other == nil {
			for _, st := range analysis.SchedNames {
				o.other = append(o.other, m.otherState.WithLabelValues(k.comm, k.dev, k.kind, st))
			}
		}
		m.fsyncMu.Unlock()
		for i, st := range analysis.SchedNames {
			o.other[i].Observe(float64(r.Sched.Other.Get(st)) / 1e9)
		}
	}
	// Flushes and FUA writes together: the metric counts flush-role
	// requests, as it did before the record counted them apart.
	o.flushes.Observe(float64(r.Flushes + r.FUAWrites))
}

// Fsync is the pipeline sink (pipeline.FsyncSink): ObserveFsync and, for a
// record whose flushes nested host-level fsyncs, ObserveStacked.
func (m *Metrics) Fsync(r *analysis.FsyncRecord) error {
	m.ObserveFsync(r)
	m.ObserveStacked(r)
	return nil
}

// Block is the pipeline's block sink (pipeline.BlockSink): ObserveBlock.
func (m *Metrics) Block(b *event.Block, diskName string) { m.ObserveBlock(*b, diskName) }

// ObserveStacked records the stacked levels of one fsync, the way
// analysis.BuildLevels counts them for the report's stacked table: if
// any of its flush requests nested host fsyncs (Request.Host), the call
// itself at level upper under its device and filesystem, and each nested
// fsync at level backing under the backing file's device and filesystem.
// A call on a device-mapper device (FsyncRecord.DM) is observed at upper,
// its dm target's hold at level dm (fs "dm") and its requests on the
// disks beneath at level lower (fs "disk"), as BuildLevels counts them.
// Records without nested fsyncs or a dm level are not observed here. The
// label sets are bounded by the machine's block devices and filesystem
// types.
func (m *Metrics) ObserveStacked(r *analysis.FsyncRecord) {
	if r.DM != nil {
		m.observeDM(r)
		return
	}
	nested := false
	for i := range r.Requests {
		if len(r.Requests[i].Host) > 0 {
			nested = true
			break
		}
	}
	if !nested {
		return
	}
	m.observeLevel(analysis.LevelUpper, r)
	var seen []string // the backing devices whose nesting time this call added
	for i := range r.Requests {
		for j := range r.Requests[i].Host {
			h := &r.Requests[i].Host[j]
			m.observeLevel(analysis.LevelBacking, h)
			dev := deviceLabel(h.DevName, h.Dev)
			if k := dev + "\x00" + h.FS; !slices.Contains(seen, k) {
				seen = append(seen, k)
				m.stackedNestIn.WithLabelValues(dev, h.FS).Add(float64(r.Layers.DeviceFlushNs) / 1e9)
			}
		}
	}
}

// observeDM observes the levels of a call on a device-mapper device.
func (m *Metrics) observeDM(r *analysis.FsyncRecord) {
	m.observeLevel(analysis.LevelUpper, r)
	dm := r.DM
	var dmFlushes, lowFlushes int
	for i := range r.Requests {
		if r.Requests[i].Role != analysis.RoleFlush {
			continue
		}
		if r.Requests[i].DM {
			dmFlushes++
		} else {
			lowFlushes++
		}
	}
	m.observeLayers(analysis.LevelDM, deviceLabel(dm.DevName, dm.Dev), "dm", dm.HeldNs, analysis.Layers{DMNs: dm.HeldNs}, dmFlushes)
	m.observeLayers(analysis.LevelLower, dm.Beneath(), "disk", dm.Lower.Sum(), dm.Lower, lowFlushes)
}

func (m *Metrics) observeLevel(level string, r *analysis.FsyncRecord) {
	m.observeLayers(level, deviceLabel(r.DevName, r.Dev), r.FS, r.TotalNs, r.Layers, r.Flushes)
}

// observeLayers observes one level's time (total, ns), its layers and
// its flush requests.
func (m *Metrics) observeLayers(level, dev, fs string, total int64, layers analysis.Layers, flushes int) {
	m.stackedFsync.WithLabelValues(level, dev, fs).Observe(float64(total) / 1e9)
	for _, l := range analysis.LayerNames {
		m.stackedLayer.WithLabelValues(level, dev, fs, l).Add(float64(layers.Get(l)) / 1e9)
	}
	m.stackedFlushes.WithLabelValues(level, dev, fs).Add(float64(flushes))
}

// FlushKind classifies a block request that persists the disk's cache:
// "flush" (REQ_OP_FLUSH), "preflush" (REQ_PREFLUSH, with or without FUA:
// the flush before the write is the slow part), "fua" (REQ_FUA only), or ""
// for any other request.
func FlushKind(b *event.Block) string {
	switch {
	case b.Op == event.OpFlush:
		return "flush"
	case b.Flags&event.ReqPreflush != 0:
		return "preflush"
	case b.Flags&event.ReqFUA != 0:
		return "fua"
	}
	return ""
}

// ObserveBlock records a flush-kind request's issue → complete time, once
// per request (its final completion); requests never issued (a flush the
// flush state machine completed by joining one in flight) and other
// requests are ignored. diskName is the disk's kernel name ("" to use
// major:minor).
func (m *Metrics) ObserveBlock(b event.Block, diskName string) {
	kind := FlushKind(&b)
	if kind == "" || !b.Final || b.IssueNs == 0 || b.CompleteNs < b.IssueNs {
		return
	}
	m.flushDuration.WithLabelValues(deviceLabel(diskName, b.Dev.String()), kind).Observe(float64(b.CompleteNs-b.IssueNs) / 1e9)
}

// Peer is the pipeline's peers sink (pipeline.PeerSink): ObservePeer.
func (m *Metrics) Peer(e *event.Peer) error {
	m.ObservePeer(*e)
	return nil
}

// ObservePeer records one peer-port event: a handshake RTT and an opened
// connection for KindOpen, an srtt sample for KindRTT, a retransmit, a
// connection's setup for PeerSetup. The peer label is the remote address
// as this host sees it.
func (m *Metrics) ObservePeer(e event.Peer) {
	if e.Kind != event.PeerOpen && e.Kind != event.PeerRTT && e.Kind != event.PeerRetransmit && e.Kind != event.PeerSetup {
		return
	}
	peer := m.peerLabel(e.Remote.Addr().Unmap().String())
	switch e.Kind {
	case event.PeerOpen:
		m.connsOpened.WithLabelValues(peer, string(e.Direction)).Inc()
		rtt := e.DurationNs // active: SYN_SENT → ESTABLISHED
		if e.Direction != event.PeerActive {
			rtt = uint64(e.SRTTus) * 1000 // passive: SYN-ACK → ACK, as srtt
		}
		if rtt > 0 {
			m.handshakeRTT.WithLabelValues(peer, string(e.Direction)).Observe(float64(rtt) / 1e9)
		}
	case event.PeerRTT:
		if e.SRTTus > 0 {
			m.srtt.WithLabelValues(peer).Observe(float64(e.SRTTus) / 1e6)
		}
	case event.PeerRetransmit:
		m.retransmits.WithLabelValues(peer).Add(float64(e.RetransmitSegments()))
	case event.PeerSetup:
		m.setup.WithLabelValues(peer, string(e.Direction)).Observe(float64(e.DurationNs) / 1e9)
	}
}

// SetComparisons replaces the inflation gauges of one etcd member (its
// metrics URL's host:port) with the comparisons of the last window.
// Comparisons without a measured RTT (no traced connection to that peer)
// are left out rather than exported as 0 or +Inf.
func (m *Metrics) SetComparisons(etcd string, cs []etcdmetric.PeerComparison) {
	for _, g := range []*prometheus.GaugeVec{m.inflation, m.etcdMean, m.etcdRTT} {
		g.DeletePartialMatch(prometheus.Labels{"etcd": etcd})
	}
	for _, c := range cs {
		if c.Inflation <= 0 || c.Input.RTT <= 0 || c.Observations == 0 {
			continue
		}
		peer := ""
		if c.Peer.IsValid() {
			peer = c.Peer.String()
		}
		lv := []string{etcd, c.Key.To, c.Key.Prober, peer}
		m.inflation.WithLabelValues(lv...).Set(c.Inflation)
		m.etcdMean.WithLabelValues(lv...).Set(c.Mean)
		m.etcdRTT.WithLabelValues(lv...).Set(c.Input.RTT.Seconds())
	}
}

// ScrapeError counts one failed scrape of an etcd member's /metrics.
func (m *Metrics) ScrapeError(etcd string) {
	m.scrapeErrors.WithLabelValues(etcd).Inc()
}
