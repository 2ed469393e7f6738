package otlp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/etcdscope/etcdscope/analysis/commit"
)

// Defaults of Config.
const (
	DefaultQueueSpans = 4096
	DefaultTimeout    = 5 * time.Second
	// SettleWait: an entry's spans are made once its record is complete
	// (a leader's with every follower's ack, a follower's answered) or
	// this long after the newest time in it.
	SettleWait = time.Second
	// pollEvery: how often the window is read for settled entries.
	pollEvery = 200 * time.Millisecond
	// maxWrites bounds the writes waiting for their spans.
	maxWrites = 1024
	// ServiceName is every agent's resource service.name; the member is
	// service.instance.id (hex id) and etcd.member.name.
	ServiceName = "etcd"
)

// Config is what serve's --otlp-* flags ask for.
type Config struct {
	Endpoint string // the collector's OTLP gRPC address, host:port
	Insecure bool   // plain gRPC (no TLS) to Endpoint
	// TLS is the client side of TLS to Endpoint (a private CA's roots,
	// a client certificate); nil: the system's roots. Not with Insecure.
	TLS *tls.Config
	// Headers go with every export (e.g. authorization: Bearer TOKEN).
	// Their values are secrets: the sink's log lines and Shutdown's
	// error show "[redacted]" in their place.
	Headers  map[string]string
	Sampling Sampling
	// QueueSpans bounds the spans waiting for export (0:
	// DefaultQueueSpans); Timeout bounds each export, retries included
	// (0: DefaultTimeout).
	QueueSpans int
	Timeout    time.Duration
	// Log receives the sink's warnings (export failures, at most one
	// line a minute); nil: io.Discard.
	Log io.Writer
}

// CheckEndpoint checks a host:port collector address.
func CheckEndpoint(s string) error {
	if strings.Contains(s, "://") {
		return fmt.Errorf("%q has a scheme: give host:port, e.g. 127.0.0.1:4317", s)
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not host:port, e.g. 127.0.0.1:4317 (OTLP gRPC's port is 4317)", s)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%q: port %q is not a number in 1-65535", s, port)
	}
	if host == "" {
		return fmt.Errorf("%q has no host: give host:port, e.g. 127.0.0.1:4317", s)
	}
	return nil
}

// Bounds of Config.Headers (serve --otlp-header): each header's key and
// value together, and how many.
const (
	MaxHeaders     = 16
	MaxHeaderBytes = 4096
)

// ParseHeader checks one key=value header for gRPC metadata: the key
// lowercased, of letters, digits, '-', '_' and '.', not grpc-* (gRPC's
// own) nor *-bin (binary); the value printable ASCII. Its errors name the
// key, never the value: a header is a secret.
func ParseHeader(s string) (key, value string, err error) {
	k, v, ok := strings.Cut(s, "=")
	k = strings.ToLower(strings.TrimSpace(k))
	switch {
	case !ok || k == "":
		return "", "", errors.New("give key=value, e.g. authorization=Bearer TOKEN (the argument is not shown: it may be a secret)")
	case len(s) > MaxHeaderBytes:
		return "", "", fmt.Errorf("%.40q...: %d bytes, give at most %d", k, len(s), MaxHeaderBytes)
	case strings.HasPrefix(k, "grpc-") || strings.HasSuffix(k, "-bin"):
		return "", "", fmt.Errorf("%q: grpc-* keys are gRPC's own and *-bin ones binary: give a text header's key", k)
	case strings.TrimLeft(k, "abcdefghijklmnopqrstuvwxyz0123456789-_.") != "":
		return "", "", fmt.Errorf("%.40q: a key has only letters, digits, '-', '_' and '.'", k)
	case v == "":
		return "", "", fmt.Errorf("%q has an empty value: give key=value", k)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "", "", fmt.Errorf("%q: its value has byte %d of %d outside printable ASCII, as gRPC requires (a newline from a file?); the value is not shown", k, i+1, len(v))
		}
	}
	return k, v, nil
}

// Sink exports a member's spans of each sampled write over OTLP: the
// write's own spans when it ran here (Write), and the spans of each Raft
// entry in the member's EntryLog, read in the background once settled.
// The trace path only ever does a non-blocking send (Write); everything
// else runs on the sink's goroutine. Counters are read by Collector.
type Sink struct {
	cfg     Config
	entries *commit.EntryLog
	tp      *sdktrace.TracerProvider
	tracer  trace.Tracer
	exp     *countingExporter
	writes  chan commit.Write

	cluster atomic.Pointer[clusterInfo]
	// clock reads the wall clock and CLOCK_MONOTONIC together; their
	// difference converts the records' times to wall time, read again
	// for each trace's spans so that a step of the wall clock (NTP,
	// settimeofday) is followed.
	clock func() (wallNs int64, monoNs uint64)
	nowNs func() uint64 // CLOCK_MONOTONIC now

	spansEnded      atomic.Uint64
	droppedQueue    atomic.Uint64 // writes dropped at the full queue
	entriesMissed   atomic.Uint64
	entriesSkipped  atomic.Uint64 // not sampled or under MinNs
	incomplete      atomic.Uint64 // entries without the records a span needs
	entriesExported atomic.Uint64 // entries whose spans were made
	writesNoTerm    atomic.Uint64 // writes whose entry's term was unknown

	cursor uint64 // the highest index handled (the sink goroutine's)
	done   chan struct{}
	stop   context.CancelFunc
}

// clusterInfo is what the IDs need: the cluster, this member, the names.
type clusterInfo struct {
	cluster, member uint64
	names           commit.Names
}

// New makes a sink that exports to cfg.Endpoint the spans of entries'
// records (nil: only the writes). It does not connect: the gRPC
// connection is made, and remade, in the background.
func New(cfg Config, entries *commit.EntryLog) (*Sink, error) {
	if err := CheckEndpoint(cfg.Endpoint); err != nil {
		return nil, err
	}
	if cfg.QueueSpans <= 0 {
		cfg.QueueSpans = DefaultQueueSpans
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(cfg.Endpoint), otlptracegrpc.WithTimeout(cfg.Timeout),
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: 250 * time.Millisecond,
			MaxInterval: time.Second, MaxElapsedTime: cfg.Timeout})}
	// The transport is always given here: the SDK reads its own
	// OTEL_EXPORTER_OTLP_* variables first, and OTEL_EXPORTER_OTLP_INSECURE
	// or an http:// OTEL_EXPORTER_OTLP_ENDPOINT in serve's environment
	// turned TLS off when no credentials were set (the header in clear).
	switch {
	case cfg.Insecure && cfg.TLS != nil:
		return nil, errors.New("otlp: TLS settings and Insecure together")
	case cfg.Insecure:
		opts = append(opts, otlptracegrpc.WithTLSCredentials(insecure.NewCredentials()))
	case cfg.TLS != nil:
		opts = append(opts, otlptracegrpc.WithTLSCredentials(credentials.NewTLS(cfg.TLS.Clone())))
	default: // the system's roots
		opts = append(opts, otlptracegrpc.WithTLSCredentials(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})))
	}
	if len(cfg.Headers) > 0 {
		h := make(map[string]string, len(cfg.Headers))
		for k, v := range cfg.Headers {
			h[k] = v
		}
		opts = append(opts, otlptracegrpc.WithHeaders(h))
	}
	quietSDK.Do(func() { otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {})) })
	inner, err := otlptracegrpc.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	s := &Sink{cfg: cfg, entries: entries, writes: make(chan commit.Write, maxWrites), clock: clocks, nowNs: monotonicNs, done: make(chan struct{})}
	s.exp = &countingExporter{SpanExporter: inner, log: cfg.Log, secrets: secrets(cfg.Headers)}
	return s, nil
}

// clocks reads the wall clock and CLOCK_MONOTONIC, about 50 ns.
func clocks() (int64, uint64) {
	return time.Now().UnixNano(), monotonicNs()
}

// monotonicNs is CLOCK_MONOTONIC now, the clock of the tracers' records.
func monotonicNs() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano())
}

// SetCluster names the cluster and this member (from etcd's member
// list): no span is made before it, since the IDs derive from both.
func (s *Sink) SetCluster(cluster, member uint64, names commit.Names) {
	s.cluster.Store(&clusterInfo{cluster: cluster, member: member, names: names})
}

// Write hands a write this member ran to the sink without blocking (a
// pipeline.CommitOptions.OnWrite): dropped, and counted, when the queue
// is full.
func (s *Sink) Write(w *commit.Write) {
	if w.Index == 0 || !s.cfg.Sampling.Sampled(w.Index) {
		return
	}
	c := *w
	c.PartsNs = make(map[string]int64, len(w.PartsNs))
	for k, v := range w.PartsNs {
		c.PartsNs[k] = v
	}
	c.Acks, c.Missing, c.Entry = nil, nil, w.Entry
	select {
	case s.writes <- c:
	default:
		s.droppedQueue.Add(1)
	}
}

// Start starts the sink's goroutine, which runs until Shutdown.
func (s *Sink) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go s.run(ctx)
}

// resource describes this member.
func (s *Sink) resource(ci *clusterInfo) *resource.Resource {
	return resource.NewSchemaless(
		attribute.String("service.name", ServiceName),
		attribute.String("service.instance.id", strconv.FormatUint(ci.member, 16)),
		attribute.String("etcd.member.name", ci.names[ci.member]),
		attribute.String("etcd.cluster.id", strconv.FormatUint(ci.cluster, 16)))
}

// run waits for the cluster, then makes spans until ctx ends; it then
// makes the spans of what is left, settled or not.
func (s *Sink) run(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	var ci *clusterInfo
	for ci == nil {
		if ci = s.cluster.Load(); ci != nil {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	s.tp = sdktrace.NewTracerProvider(
		sdktrace.WithResource(s.resource(ci)),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithIDGenerator(idGenerator{}),
		// Blocking: the queue never drops silently; when it is full this
		// goroutine waits, and the writes' queue (Write) and the entry
		// window fill up instead, each counted.
		sdktrace.WithBatcher(s.exp, sdktrace.WithMaxQueueSize(s.cfg.QueueSpans), sdktrace.WithBlocking(),
			sdktrace.WithBatchTimeout(time.Second), sdktrace.WithExportTimeout(s.cfg.Timeout)))
	s.tracer = s.tp.Tracer("github.com/etcdscope/etcdscope/exporter/otlp")
	for {
		select {
		case <-ctx.Done():
			s.drain(ci, true)
			return
		case w := <-s.writes:
			s.write(ci, &w)
		case <-t.C:
			s.drain(ci, false)
		}
	}
}

// drain makes the spans of the queued writes and the settled entries
// (all of them when final).
func (s *Sink) drain(ci *clusterInfo, final bool) {
	for {
		select {
		case w := <-s.writes:
			s.write(ci, &w)
			continue
		default:
		}
		break
	}
	if s.entries == nil {
		return
	}
	voters := len(ci.names)
	now := s.nowNs()
	wait := uint64(SettleWait)
	if final {
		wait = 0
	}
	es, _ := s.entries.Since(s.cursor, commit.MaxEntries)
	for i := range es {
		e := &es[i]
		if !settled(e, voters, now, wait) {
			return
		}
		if s.cursor != 0 && e.Index > s.cursor+1 {
			s.entriesMissed.Add(e.Index - s.cursor - 1)
		}
		s.cursor = e.Index
		s.entry(ci, e, voters)
	}
}

// write exports the spans of one write this member ran.
func (s *Sink) write(ci *clusterInfo, w *commit.Write) {
	if s.cfg.Sampling.MinNs > 0 && w.TotalNs() < s.cfg.Sampling.MinNs {
		return
	}
	term := uint64(0)
	if w.Entry != nil && w.Entry.Index == w.Index {
		term = w.Entry.Term
	} else if s.entries != nil {
		if e, ok := s.entries.Get(w.Index); ok {
			term = e.Term
		}
	}
	if term == 0 {
		s.writesNoTerm.Add(1)
		return
	}
	k := Key{Cluster: ci.cluster, Term: term, Index: w.Index}
	s.export(ci, k, WriteSpans(k, commit.MemberID(ci.member), w), string(w.Role))
}

// entry exports this member's spans of one settled entry record.
func (s *Sink) entry(ci *clusterInfo, e *commit.Entry, voters int) {
	if !s.cfg.Sampling.Sampled(e.Index) {
		s.entriesSkipped.Add(1)
		return
	}
	self := commit.MemberID(ci.member)
	var spans []Span
	if e.Follower() {
		spans = FollowerSpans(self, e)
	} else {
		spans = LeaderSpans(self, e, voters)
	}
	if len(spans) == 0 {
		s.incomplete.Add(1)
		return
	}
	if s.cfg.Sampling.MinNs > 0 && spans[0].DurationNs() < s.cfg.Sampling.MinNs {
		s.entriesSkipped.Add(1)
		return
	}
	s.entriesExported.Add(1)
	s.export(ci, Key{Cluster: ci.cluster, Term: e.Term, Index: e.Index}, spans, "")
}

// spanNames are the span names by part.
var spanNames = map[string]string{
	PartWrite: "etcd write", PartReplicate: "raft replicate (leader)", PartWALAppend: "wal append", PartFdatasync: "wal sync (write + fdatasync)",
	PartEntry: "raft entry (follower)", PartQueue: "queue (until the Save)", PartRespond: "respond (Save end to the answer's Send)",
}

// spanName names a span for the trace view.
func spanName(sp *Span, names commit.Names) string {
	if n, ok := spanNames[sp.Part]; ok {
		return n
	}
	if strings.HasPrefix(sp.Part, PartVotePrefix) {
		return "vote of " + memberName(sp.Peer, names)
	}
	return strings.TrimPrefix(sp.Part, PartWrite+"/")
}

func memberName(id commit.MemberID, names commit.Names) string {
	if n := names[uint64(id)]; n != "" {
		return n
	}
	return strconv.FormatUint(uint64(id), 16)
}

// export starts and ends each planned span with its derived IDs and the
// member's times converted to wall time.
func (s *Sink) export(ci *clusterInfo, k Key, spans []Span, role string) {
	tid := TraceID(k)
	wallNs, monoNs := s.clock()
	off := wallNs - int64(monoNs) // one offset for the trace's spans: durations exact
	for i := range spans {
		sp := &spans[i]
		ctx := context.Background()
		if sp.ParentPart != "" {
			pm := sp.ParentMember
			if sp.ParentPart == PartWrite {
				pm = 0
			}
			ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: tid, SpanID: SpanID(k, pm, sp.ParentPart), TraceFlags: trace.FlagsSampled, Remote: true}))
		}
		member := sp.Member
		if sp.Part == PartWrite {
			member = 0
		}
		ctx = withIDs(ctx, tid, SpanID(k, member, sp.Part))
		attrs := []attribute.KeyValue{
			attribute.Int64("etcd.raft.term", int64(k.Term)), attribute.Int64("etcd.raft.index", int64(k.Index)),
			attribute.String("etcd.member.id", strconv.FormatUint(ci.member, 16)),
			attribute.String("etcdscope.part", sp.Part),
			attribute.Int64("etcdscope.duration_ns", sp.DurationNs()),
		}
		if sp.Peer != 0 {
			attrs = append(attrs, attribute.String("etcd.peer.id", strconv.FormatUint(uint64(sp.Peer), 16)),
				attribute.String("etcd.peer.name", memberName(sp.Peer, ci.names)))
		}
		if sp.Deciding {
			attrs = append(attrs, attribute.Bool("etcdscope.deciding_vote", true))
		}
		if sp.Batch > 1 {
			attrs = append(attrs, attribute.Int("etcdscope.batch_entries", sp.Batch))
		}
		if sp.Laid {
			attrs = append(attrs, attribute.Bool("etcdscope.start_laid_out", true))
		}
		if role != "" && sp.Part == PartWrite {
			attrs = append(attrs, attribute.String("etcd.role", role))
		}
		_, span := s.tracer.Start(ctx, spanName(sp, ci.names), trace.WithTimestamp(wall(sp.StartNs, off)), trace.WithAttributes(attrs...))
		span.End(trace.WithTimestamp(wall(sp.EndNs, off)))
		s.spansEnded.Add(1)
	}
}

// wall converts a CLOCK_MONOTONIC time to wall time by off (wall minus
// monotonic): the spans converted by one off keep their durations exact.
func wall(ns uint64, off int64) time.Time {
	return time.Unix(0, int64(ns)+off)
}

// Shutdown stops the sink: the spans of every entry left are made, and
// what is queued is exported until ctx ends; it returns how many spans
// were handed to the exporter but not exported (0: none lost).
func (s *Sink) Shutdown(ctx context.Context) (unexported uint64, err error) {
	if s.stop != nil {
		s.stop()
		select {
		case <-s.done:
		case <-ctx.Done():
			return s.pending(), ctx.Err()
		}
	}
	if s.tp != nil {
		err = s.tp.Shutdown(ctx)
	}
	if err != nil && s.exp.redact(err.Error()) != err.Error() {
		err = errors.New(s.exp.redact(err.Error()))
	}
	return s.pending(), err
}

// pending is the spans made but neither exported nor failed.
func (s *Sink) pending() uint64 {
	ended, done := s.spansEnded.Load(), s.exp.exported.Load()+s.exp.failed.Load()
	if ended > done {
		return ended - done
	}
	return 0
}

// countingExporter counts the spans the collector took and those it did
// not (an error, a timeout), and logs the failures at most once a minute.
type countingExporter struct {
	sdktrace.SpanExporter
	exported, failed atomic.Uint64
	log              io.Writer
	secrets          []string // Config.Headers' values, never written to log
	mu               sync.Mutex
	lastLog          time.Time
}

// secrets are the values to keep out of the log: each header's value,
// and each word of it of 8 bytes or more (the token of "Bearer TOKEN"),
// longest first.
func secrets(headers map[string]string) []string {
	var out []string
	for _, v := range headers {
		out = append(out, v)
		for _, w := range strings.Fields(v) {
			if len(w) >= 8 && w != v {
				out = append(out, w)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// redact replaces every secret in s by "[redacted]": an error from the
// collector may quote what it was sent.
func (c *countingExporter) redact(s string) string {
	for _, v := range c.secrets {
		if v != "" {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}

// ExportSpans exports and counts.
func (c *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		c.exported.Add(uint64(len(spans)))
		return nil
	}
	c.failed.Add(uint64(len(spans)))
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.lastLog) >= time.Minute {
		c.lastLog = time.Now()
		fmt.Fprintf(c.log, "etcdscope serve: otlp: %d spans not exported: %s (etcdscope_otlp_spans_dropped_total counts them)\n", len(spans), c.redact(err.Error()))
	}
	return errExported
}

// errExported is what the batch processor hands to otel's global error
// handler: the failure itself is counted and logged above.
var errExported = errors.New("otlp export failed (counted)")

// quietSDK: the SDK's failures are counted and logged by
// countingExporter; without this otel's global handler would log each one.
var quietSDK sync.Once
