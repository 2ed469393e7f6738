package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/capture"
	"github.com/etcdscope/etcdscope/etcdinfo"
	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/internal/safefile"
	"github.com/etcdscope/etcdscope/pipeline"
	"github.com/etcdscope/etcdscope/render"
	"github.com/etcdscope/etcdscope/tracer"
)

func init() {
	subcommands["peers"] = subcommand{
		summary: "real RTT to each etcd peer on :2380, and whether etcd's peer-RTT metric tells the truth",
		run:     runPeers,
	}
}

type peersFlags struct {
	port                          int
	peerArgs, endpoints           []string
	duration                      time.Duration
	output, metricsURL, readyFile string
	record, capture               string
	cacert, cert, key             string
	probeAnswer, probeAnswerSet   bool
	ringBytes                     uint64
}

// peersStdout is where the report goes (tests capture it).
var peersStdout io.Writer = os.Stdout

// peersStderr is where peers and its replay say what of etcd they could
// not read (peersEtcdErrors); tests replace it.
var peersStderr io.Writer = os.Stderr

func runPeers(args []string) error {
	var f peersFlags
	fs := newFlagSet("peers")
	fs.SortFlags = false
	fs.IntVar(&f.port, "port", tracer.DefaultPeerPort, "etcd's peer port: connections with this local or remote port are traced")
	fs.StringArrayVar(&f.peerArgs, "peer", nil, "trace only connections to/from this peer IP (IPv4 or IPv6; repeat for several)")
	fs.DurationVar(&f.duration, "duration", time.Minute, "trace this long (0: until Ctrl-C); etcd observes its metric once per prober per 30 s, so give it 2m for a comparison")
	fs.StringVar(&f.output, "output", "table", "table, or json (one object)")
	fs.Uint64Var(&f.ringBytes, "ring-size", tracer.DefaultPeerRingBytes, ringSizeUsage)
	fs.StringVar(&f.metricsURL, "etcd-metrics", "", "etcd /metrics URL of the member on this host, scraped at start and end, e.g. http://127.0.0.1:2381/metrics")
	fs.StringVar(&f.cacert, "cacert", "", "CA bundle for https --etcd-metrics and --etcd-endpoints")
	fs.StringVar(&f.cert, "cert", "", "client certificate for https --etcd-metrics and --etcd-endpoints")
	fs.StringVar(&f.key, "key", "", "client key for --cert")
	fs.StringSliceVar(&f.endpoints, "etcd-endpoints", nil, "client URLs (comma-separated): member list and leader, to name peers and warn when the leader is the farthest")
	fs.BoolVar(&f.probeAnswer, "probe-answer", true, "with --etcd-endpoints: GET /raft/probing on a kept-alive connection to each peer every 4 s, timed as etcd's prober times it")
	fs.StringVar(&f.record, "record", "", "also write every traced event to this file as JSON Lines (schema peers/v1, docs/peers.md)")
	fs.StringVar(&f.capture, "capture", "", "also write the traced events with the window and lost count to this file (schema capture/v2), for 'etcdscope report FILE' to replay")
	fs.StringVar(&f.readyFile, "ready-file", "", "create this file once the probes are attached (for scripts and tests)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errHelp
		}
		return usagef("%v (see 'etcdscope peers --help')", err)
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q (see 'etcdscope peers --help')", fs.Arg(0))
	}
	if err := emptyFlags(fs, "etcd-endpoints", "etcd-metrics"); err != nil {
		return err
	}
	f.probeAnswerSet = fs.Changed("probe-answer")
	cfg, tlsCfg, err := f.validate()
	if err != nil {
		return err
	}
	if err := tracer.CheckPrerequisites(); err != nil {
		return usagef("%v", err)
	}
	return tracePeers(f, cfg, tlsCfg)
}

// validate checks every flag before anything touches the host.
func (f *peersFlags) validate() (tracer.PeersConfig, *tls.Config, error) {
	var cfg tracer.PeersConfig
	switch {
	case f.port < 1 || f.port > 65535:
		return cfg, nil, usagef("--port %d is out of range; give 1-65535 (etcd's peer port is 2380)", f.port)
	case f.duration < 0:
		return cfg, nil, usagef("--duration %v is negative; give e.g. 2m, or 0 to run until Ctrl-C", f.duration)
	case f.output != "table" && f.output != "json":
		return cfg, nil, usagef("--output %q: use table or json", f.output)
	}
	if err := checkTLSFlags(f.cacert, f.cert, f.key, f.metricsURL != "" || len(f.endpoints) > 0, "--etcd-metrics", "--etcd-endpoints"); err != nil {
		return cfg, nil, err
	}
	cfg.Port = uint16(f.port)
	ring, err := ringSize(f.ringBytes)
	if err != nil {
		return cfg, nil, err
	}
	cfg.RingBytes = ring
	for _, p := range f.peerArgs {
		a, err := netip.ParseAddr(strings.Trim(p, "[]"))
		if err != nil || a.Zone() != "" {
			return cfg, nil, usagef("--peer %q is not an IP address; give e.g. 10.0.0.2 or fd00::2", p)
		}
		cfg.Peers = append(cfg.Peers, a.Unmap())
	}
	if f.metricsURL != "" {
		if err := checkURL(f.metricsURL); err != nil {
			return cfg, nil, usagef("--etcd-metrics %v", err)
		}
	}
	for _, e := range f.endpoints {
		if err := checkURL(e); err != nil {
			return cfg, nil, usagef("--etcd-endpoints %v", err)
		}
	}
	if f.record != "" {
		if err := safefile.CheckDir(f.record); err != nil {
			return cfg, nil, usagef("--record %s: %v", f.record, err)
		}
	}
	if f.readyFile != "" {
		if err := safefile.CheckDir(f.readyFile); err != nil {
			return cfg, nil, usagef("--ready-file %s: %v", f.readyFile, err)
		}
	}
	if f.probeAnswerSet && f.probeAnswer && len(f.endpoints) == 0 {
		return cfg, nil, usagef("--probe-answer needs the member list: add --etcd-endpoints, e.g. http://127.0.0.1:2379")
	}
	if f.capture != "" {
		if err := checkCapturePath(f.capture); err != nil {
			return cfg, nil, err
		}
	}
	tlsCfg, err := clientTLS(f.cacert, f.cert, f.key)
	if err != nil {
		return cfg, nil, err
	}
	return cfg, tlsCfg, nil
}

// checkTLSFlags refuses --cert without --key (or the reverse), and
// --cacert/--cert/--key unless used: one of uses, the flags that take
// them, is given.
func checkTLSFlags(cacert, cert, key string, used bool, uses ...string) error {
	switch {
	case (cert == "") != (key == ""):
		return usagef("--cert and --key go together")
	case (cacert != "" || cert != "") && !used && len(uses) == 1:
		return usagef("--cacert/--cert/--key are for %s: give it, or drop them", uses[0])
	case (cacert != "" || cert != "") && !used:
		return usagef("--cacert/--cert/--key are for %s: give one of those, or drop them", strings.Join(uses, " or "))
	}
	return nil
}

// clientTLS builds the TLS configuration of --cacert/--cert/--key (nil
// when none is given); a file that cannot be used is a usage error.
func clientTLS(cacert, cert, key string) (*tls.Config, error) {
	return loadTLS(etcdinfo.TLSFiles{CAFlag: "--cacert", CA: cacert, CertFlag: "--cert", Cert: cert, KeyFlag: "--key", Key: key})
}

// loadTLS is etcdinfo.LoadTLS with its error a usage error (exit 2).
func loadTLS(f etcdinfo.TLSFiles) (*tls.Config, error) {
	cfg, err := etcdinfo.LoadTLS(f)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return cfg, nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL: give an http:// or https:// URL with a host", s)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q: give an http:// or https:// URL with a host", s)
	}
	return nil
}

func tracePeers(f peersFlags, cfg tracer.PeersConfig, tlsCfg *tls.Config) error {
	ctx, s, stop := newSession("peers", 0, f.readyFile) // --duration counts from the tracer's start (s.Limit)
	defer stop()
	defer s.Close()
	r, err := pipeline.StartPeersEtcd(ctx, pipeline.PeersEtcdConfig{Endpoints: f.endpoints, MetricsURL: f.metricsURL, TLS: tlsCfg,
		ProbeAnswer: f.probeAnswer, Port: int(cfg.Port), OnStartScrapeErr: func(err error) {
			fmt.Fprintln(os.Stderr, render.PeersStartScrapeError(f.metricsURL, err))
		}})
	if err != nil {
		// Only an unreachable member list, before anything is attached:
		// a wrong address is bad input.
		return usagef("%v", err)
	}
	defer r.StopProbe()
	out, err := newPeersOutput(f, cfg, r.Owns)
	if err != nil {
		return err
	}
	defer out.abandon()
	pp := pipeline.NewPeers(pipeline.PeersConfig{Sinks: out.sinks})
	s.Limit(f.duration) // after the start scrape, which waits up to 5 s for etcd
	var owners host.SocketOwnerStats
	st, err := func() (*pipeline.Stats, error) {
		tr, err := tracer.NewPeers(cfg)
		if err != nil {
			return nil, err
		}
		st := s.Add("", tr)
		if err := s.Ready(); err != nil {
			fmt.Fprintln(os.Stderr, render.PeersReadyError(err)) // the run goes on
		}
		s.Go(func() error { return pp.Run(tr) })
		if err := s.Wait(pipeline.WaitOptions{}); err != nil {
			return nil, err
		}
		return st, s.Finish(func() { owners = tr.OwnerStats() })
	}()
	r.StopProbe()
	if err != nil {
		return setupErr(fmt.Errorf("tracing: %w", err))
	}
	t1 := time.Now()
	r.Finish(ctx, t1) // the end scrape, which the capture carries
	if err := out.commit(*st, t1.Sub(r.Start()), capture.End{OwnConns: r.OwnConns(), Members: r.Members(), MembersError: r.MembersError(), Etcd: r.Evidence()}); err != nil {
		return err
	}
	rep := r.Report(*st, owners, &out.conns)
	if f.record != "" && (len(rep.Metric) > 0 || len(rep.OwnConns) > 0) {
		// What etcd measured, for report --html to draw beside the model,
		// and etcdscope's own connections, for it to leave out.
		if err := pipeline.AppendMetricRecord(f.record, render.WordComparisons(rep.Metric), rep.OwnConns); err != nil {
			return fmt.Errorf("--record: %w", err)
		}
	}
	if f.output == "json" {
		if err := render.PeersJSON(peersStdout, rep); err != nil {
			return err
		}
	} else {
		render.Peers(peersStdout, rep)
	}
	peersEtcdErrors(rep)
	return decodeErrors(pp.DecodeErrors())
}

// peersEtcdErrors says on stderr what of etcd a peers run could not read
// (its metric scrapes, its member list): live, and again in a capture's
// replay.
func peersEtcdErrors(rep *etcdmetric.PeersReport) {
	if rep.MetricsError != "" {
		fmt.Fprintln(peersStderr, render.PeersMetricsError(rep.MetricsURL, rep.MetricsError))
	}
	if rep.MembersError != "" {
		fmt.Fprintln(peersStderr, render.PeersMembersError(rep.MembersError))
	}
}

// peersOutput is where the traced events go as they come: folded into
// their connections (pipeline.PeerConns) and, with --record or
// --capture, written out; none is kept (at 30k events/s keeping them all
// grew the RSS by 16 MB a second).
type peersOutput struct {
	conns pipeline.PeerConns
	sinks []pipeline.PeerSink
	rec   *pipeline.PeersRecording
	capw  *pipeline.CaptureFile // until finished
}

func newPeersOutput(f peersFlags, cfg tracer.PeersConfig, probeOwns func(netip.AddrPort) bool) (*peersOutput, error) {
	o := &peersOutput{}
	o.conns.Exclude(probeOwns)
	o.sinks = []pipeline.PeerSink{&o.conns}
	var err error
	if f.record != "" {
		if o.rec, err = pipeline.NewPeersRecording(f.record); err != nil {
			return nil, fmt.Errorf("--record: %w", err)
		}
		o.sinks = append(o.sinks, o.rec)
	}
	if f.capture != "" {
		if o.capw, err = pipeline.CreateCapture(f.capture, capture.Header{Tracer: capture.TracerPeers, Command: "peers", Port: int(cfg.Port)}); err != nil {
			o.abandon()
			return nil, err
		}
		o.sinks = append(o.sinks, o.capw)
	}
	return o, nil
}

// commit puts the recording and the capture (with the window, the
// counts and what the run knew of the cluster, known: the probe's own
// connections and the member list) in place.
func (o *peersOutput) commit(st pipeline.Stats, window time.Duration, known capture.End) error {
	if o.rec != nil {
		if err := o.rec.Commit(); err != nil {
			return fmt.Errorf("--record: %w", err)
		}
	}
	if o.capw != nil {
		end := known
		end.LostEvents, end.MissedEvents, end.WindowNs = st.Lost, st.Missed, int64(window)
		end.MonoToWallNs = host.MonoToWallNs() // report --html sets its span against an fsync run's
		err := o.capw.Finish(end)
		o.capw = nil
		if err != nil {
			return err
		}
	}
	return nil
}

// abandon releases the recording (removed unless committed) and removes
// a capture not finished.
func (o *peersOutput) abandon() {
	if o.rec != nil {
		o.rec.Close()
	}
	if o.capw != nil {
		o.capw.Abandon()
	}
}
