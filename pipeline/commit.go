package pipeline

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/analysis/stats"
	"github.com/etcdscope/etcdscope/etcdinfo"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/workload"
)

// CommitSource is the commit tracer as RunCommit reads it
// (tracer.CommitTracer): events in ring order and its counters. The
// session it was handed to (Session.Add) drains and closes it.
type CommitSource interface {
	Read(ev *event.Commit) error
	Lost() (uint64, error)
	Missed() uint64
	Drain() error
	// Writes returns the writes the kernel saw enter etcd's write
	// function, those it followed (sampled) and the followed ones it
	// forgot (tracer.CommitCounts).
	Writes() (seen, sampled, dropped uint64, err error)
}

// SyncSource is the fsync tracer as RunCommit reads it beside the commit
// tracer (tracer.FsyncTracer filtered to etcd's process, with its
// scheduler states): every fsync and fdatasync call of etcd split into
// kernel layers, to join with the writes' WAL fdatasyncs.
type SyncSource interface {
	FsyncSource
	Lost() (uint64, error)
	Missed() uint64
	Drain() error
}

// CommitOptions configures RunCommit.
type CommitOptions struct {
	PID       int           // the etcd member on this host
	Endpoints []string      // client URLs: member list, leader, role, metrics for the model; the load's target
	TLS       *tls.Config   // for https endpoints (nil: plain)
	Duration  time.Duration // 0: until ctx ends
	// LoadPerSec > 0 drives the built-in put load (Load) at the member
	// of PID (needs Endpoints).
	LoadPerSec float64
	RingBytes  uint32
	// Notice receives the run's progress notices for the user (what the
	// load writes, which part of a write is unavailable), typed:
	// render.CommitNotice words them; may be nil.
	Notice func(commit.Notice)
	// Source is the attached commit tracer (the caller closes it). nil
	// when etcd's functions cannot be probed: SourceErr says why, and
	// RunCommit falls back to the kernel-only model from etcd's metrics
	// (needs Endpoints).
	Source    CommitSource
	SourceErr error
	// Unavailable lists the parts of a write the attached probes cannot
	// show, and why (tracer.CommitTracer.Unavailable,
	// analysis.UnavailablePart).
	Unavailable []analysis.Unavailable
	// Syncs, when set, is the fsync tracer on the same process (the
	// caller closes it): each write's WAL fdatasync is joined with its
	// split of that call (commit.JoinSyncs), so that the verdict names
	// the disk's layer or the CPU it waited on; and each Save's
	// (*WAL).sync in Entries with the same split as the calls arrive
	// (Entry.SyncCause: what a follower's fdatasync waited on, for
	// `etcdscope cluster`).
	Syncs SyncSource
	// EntryCausesOnly: Syncs' calls go to Entries' join alone; nothing is
	// kept for a join of the writes at the end of the run (serve, which
	// runs until stopped and reports no summary).
	EntryCausesOnly bool
	// Raw: the source also sends every probe's firing (the reference
	// stream, tracer.CommitConfig.Raw): they are assembled in Go
	// (commit.Assembler) and the kernel's assembled records are ignored.
	Raw bool
	// SampleEvery: the source follows 1 write in N
	// (tracer.CommitConfig.SampleEvery), for the result.
	SampleEvery uint32
	// Entries, when set, keeps this member's per-entry records (a
	// follower's receive, WAL Save and answer; the leader's send and the
	// followers' acks) for a reader beside the run (serve's
	// /commit/entries); nil: RunCommit keeps its own. Each write's
	// Write.Entry is its entry's record.
	Entries *commit.EntryLog
	// OnFollowerEntry receives the split of every entry this member, as a
	// follower, received, saved and answered (EntryLog.Add).
	OnFollowerEntry func(commit.FollowerSplit)
	// OnWrite receives every finished write, in the order they finished.
	OnWrite func(*commit.Write, commit.Names) error
	// ModelScrapeEvery: how often the members' /metrics are scraped
	// during the run, the latest answer per member standing in for one
	// the end scrape misses (0: modelScrapeEvery; negative: none, nor
	// the start and end scrapes, for a run that reports no model: serve).
	ModelScrapeEvery time.Duration
	// StopAtOnce: a run stopped by its context (serve's stop signal, not
	// etcd's exit) skips the finish's wait for the last writes' events:
	// nothing reads them after the stop, and the caller must exit within
	// 2 s of the signal.
	StopAtOnce bool
	// WaitCluster: when Endpoints do not answer (etcdinfo.ErrUnreachable:
	// etcd still starting), ask again while the process runs instead of
	// failing the run (serve: the agent stays up; discoverCluster).
	WaitCluster bool
	// OnMember, when set with Endpoints, receives etcd's cluster id, the
	// traced member's id and the members' names once they are known (at
	// the start; not called when the member cannot be asked).
	OnMember func(cluster, member uint64, names commit.Names)
}

// CommitResult is what a run found.
type CommitResult struct {
	Source string // commit.SourceUprobes, or commit.SourceModel when etcd could not be probed
	// ProbeErr says why etcd could not be probed (Source is model).
	ProbeErr    error
	Report      *commit.Report
	Cluster     commit.ClusterState
	EtcdVersion string      // the traced member's etcd version ("3.4.23"; "" without --etcd-endpoints)
	Role        commit.Role // at the end ("" when unknown: no --etcd-endpoints)
	LocalID     uint64
	LeaderID    uint64
	Unavailable []analysis.Unavailable // parts of a write the probes cannot show, with why
	Lost        uint64
	Missed      uint64
	Dropped     int // writes the kernel, the assembler or the joiner forgot, or that never returned
	// WritesSeen and WritesSampled: the writes the kernel saw and those it
	// followed (tracer.CommitConfig.SampleEvery); the report's writes are
	// the sampled ones.
	WritesSeen, WritesSampled uint64
	SampleEvery               uint32 // CommitOptions.SampleEvery, at least 1
	// DecodeErrors counts ring records that could not be decoded (the
	// run went on without them; the CLI fails at exit when it is not 0).
	DecodeErrors uint64
	decodeErrors atomic.Uint64
	// WALSyncs are every (*WAL).sync traced (with or without a write's
	// entries): what etcd_disk_wal_fsync_duration_seconds also counts.
	WALSyncs stats.Series
	Model    *commit.ModelResult // from etcd's metrics over the run (needs Endpoints)
	ModelIn  *commit.ModelInput
	ModelErr error
	// ModelScrapes: per member, the scrape the model's numbers of that
	// member end on (the end scrape, else the latest during the run).
	ModelScrapes []commit.ModelScrape
	// Target: whether the traced process exited (the run stopped then)
	// or was stopped during the run.
	Target  commit.Target
	Load    *workload.Load // nil without --load
	LoadErr error
	// ClientOutsideNs: for each load put paired with its traced write,
	// the client's time minus the server's (PairClient).
	ClientOutsideNs stats.Series
	spans           [][2]uint64 // the writes' [start, end], for pairing
	// SyncCalls: etcd's fsync/fdatasync calls the fsync tracer split
	// (Options.Syncs); SyncLost, SyncMissed its lost events and missed
	// probe runs. The join's result is Report.WALCause.
	SyncCalls  int
	SyncLost   uint64
	SyncMissed uint64
	syncWins   []commit.SyncWindow // the writes' (*WAL).sync windows, for the join
}

// RunCommit traces the writes of etcd process opt.PID in session s until
// opt.Duration passes (counted from when the cluster is known), s's
// context ends or the process exits. The caller opened opt.Source and
// opt.Syncs and handed them to s (Session.Add), which drains and closes
// them; RunCommit runs the phases: Ready, Go (the readers), Wait (the
// role poll), Finish. When etcd's functions cannot be probed (another
// architecture, a build without them) it falls back to the kernel-only
// model from etcd's metrics (Source "model"), if Endpoints are given.
func RunCommit(s *Session, opt CommitOptions) (*CommitResult, error) {
	res := &CommitResult{Source: commit.SourceUprobes, Report: commit.NewReport(), Cluster: commit.ClusterState{Names: commit.Names{}},
		SampleEvery: max(opt.SampleEvery, 1)}
	notice := func(n commit.Notice) {
		if opt.Notice != nil {
			opt.Notice(n)
		}
	}

	// The cluster: members, this member, the leader.
	var cl *etcdinfo.Cluster
	var members []etcdmetric.Member
	if len(opt.Endpoints) > 0 {
		var err error
		if cl, err = discoverCluster(s.Context(), opt, notice); err != nil {
			return nil, err
		}
	}
	if cl != nil {
		defer cl.Close()
		members = cl.Members
		res.Cluster.Voters = len(members)
		for _, m := range members {
			res.Cluster.Names[m.ID] = m.Name
		}
		res.LocalID, res.LeaderID, res.EtcdVersion = cl.LocalID, cl.LeaderID, cl.Version
		res.Role = roleOf(res.LocalID, res.LeaderID)
		if opt.OnMember != nil {
			opt.OnMember(cl.ClusterID, res.LocalID, maps.Clone(res.Cluster.Names))
		}
	}
	entries := opt.Entries
	if entries == nil {
		entries = commit.NewEntryLog(0)
	}
	entries.SetMember(res.LocalID)
	entries.SetNames(res.Cluster.Names)
	// The window starts once the cluster is known: a slow member list
	// must neither eat into --duration nor be cut short by it.
	s.Limit(opt.Duration)
	// The run also ends, at once, when the traced process exits: what
	// it traced is the report (a restarted etcd is another process).
	ctx, endRun := context.WithCancel(s.Context())
	defer endRun()
	target := watchTarget(ctx, opt.PID, endRun)
	var urls []metricsURL
	var startErr error
	if opt.ModelScrapeEvery >= 0 { // else no model: no scrape at the start, during or at the end
		urls, startErr = metricsURLs(ctx, members, cl)
	}
	var startScrape map[uint64]scrape
	if startErr == nil && len(urls) > 0 {
		var errs map[uint64]error
		if startScrape, errs = scrapeAll(ctx, urls, opt.TLS); len(startScrape) == 0 {
			startScrape, startErr = nil, oneErr(errs)
		}
	}

	j := commit.NewJoiner(commit.Config{Role: res.Role, Voters: res.Cluster.Voters})
	asm := commit.NewAssembler() // for the raw firings (opt.Raw)
	tr := opt.Source
	if tr == nil {
		err := opt.SourceErr
		if err == nil {
			err = errors.New("no commit tracer")
		}
		if len(opt.Endpoints) == 0 {
			return nil, fmt.Errorf("%w; without uprobes only the model from etcd's metrics is left: give --etcd-endpoints", err)
		}
		res.Source, res.ProbeErr = commit.SourceModel, err
		res.Unavailable = append(res.Unavailable, analysis.Unavailable{Part: "uprobes", Reason: event.ReasonRefused, Err: err.Error()})
		notice(commit.Notice{Kind: commit.NoticeModelFallback, Err: err})
	} else {
		res.Unavailable = append(res.Unavailable, opt.Unavailable...)
		analysis.SortUnavailable(res.Unavailable)
		for _, u := range res.Unavailable {
			notice(commit.Notice{Kind: commit.NoticeUnavailable, Unavailable: u})
		}
	}
	if err := s.Ready(); err != nil {
		return nil, err
	}

	// The reader: events -> joiner -> sinks.
	var mu sync.Mutex            // guards the joiner's role and res.Report against the role poller
	var syncScheds []event.Sched // CommitSched records: the WAL sync threads' states
	if tr != nil {
		s.Go(func() error {
			var out []commit.Write
			var recs []event.Commit
			var done []commit.FollowerSplit
			// The loop every tracer shares: decode errors are counted
			// (res.DecodeErrors) and the run goes on.
			readErr := run(tr.Read, &res.decodeErrors, nil, func(ev *event.Commit) (bool, error) {
				mu.Lock()
				defer mu.Unlock()
				if ev.Kind == event.CommitSched {
					// The WAL sync's thread states, for the join with
					// the fsync tracer's calls at the end.
					if opt.Syncs != nil {
						e := event.Sched{TID: ev.TID, State: event.SchedState(ev.A), Ns: ev.TsNs}
						entries.AddSched(e)
						if !opt.EntryCausesOnly && len(syncScheds) < 4*maxKept {
							syncScheds = append(syncScheds, e)
						}
					}
					return false, nil
				}
				if opt.Raw && assembled(ev.Kind) {
					return false, nil // the reference assembles them in Go
				}
				recs = asm.Add(ev, recs[:0])
				out = out[:0]
				for i := range recs {
					if r := &recs[i]; r.Kind == event.CommitSyncDone {
						res.WALSyncs.Add(int64(r.Save.SyncEndNs - r.Save.SyncStartNs))
					}
					if done = entries.Add(&recs[i], done[:0]); opt.OnFollowerEntry != nil {
						for _, f := range done {
							opt.OnFollowerEntry(f)
						}
					}
					out = j.Add(&recs[i], out)
				}
				return false, deliver(out, res, opt, entries)
			})
			mu.Lock()
			defer mu.Unlock()
			return errors.Join(readErr, deliver(j.Flush(out[:0]), res, opt, entries))
		})
	}

	// The fsync tracer's reader: etcd's fsync calls, split into layers.
	calls := syncCalls{entries: entries, keep: !opt.EntryCausesOnly}
	if tr != nil && opt.Syncs != nil {
		s.Go(func() error {
			p := NewFsyncLoop(FsyncLoopConfig{Sched: true, Sinks: []FsyncSink{&calls}})
			if err := p.Run(opt.Syncs); err != nil {
				return fmt.Errorf("fsync tracer: %w", err)
			}
			return nil
		})
	}

	// The load, and the role poller (a leader change changes the split).
	var loadWG sync.WaitGroup
	if opt.LoadPerSec > 0 && cl != nil { // cl nil: the process gone while WaitCluster waited
		lcli, err := clientv3.New(clientv3.Config{Endpoints: []string{cl.Local}, TLS: opt.TLS, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err == nil {
			defer lcli.Close()
			res.Load, err = workload.NewLoad(ctx, lcli, opt.LoadPerSec, opt.Duration)
		}
		if err != nil {
			res.LoadErr = err
			notice(commit.Notice{Kind: commit.NoticeLoadFailed, Err: err})
		} else {
			notice(commit.Notice{Kind: commit.NoticeLoadStarted, Load: res.Load.Info()})
			loadWG.Go(func() { res.Load.Run(ctx) })
		}
	}
	wait := WaitOptions{Done: ctx.Done()}
	if cl != nil {
		wait.Every, wait.Tick = rolePollEvery, func() {
			leader, err := cl.Leader(ctx, rolePollEvery)
			if err == nil && leader != res.LeaderID {
				mu.Lock()
				res.LeaderID, res.Role = leader, roleOf(res.LocalID, leader)
				j.SetRole(res.Role)
				mu.Unlock()
				notice(commit.Notice{Kind: commit.NoticeLeaderChanged, Leader: res.Cluster.Names.Of(leader), Role: res.Role})
			}
		}
	}
	// The members' /metrics during the run, for a member the end scrape
	// misses.
	var during duringScrapes
	var duringWG sync.WaitGroup
	if startScrape != nil && opt.ModelScrapeEvery >= 0 {
		duringWG.Go(func() { during.run(ctx, urls, cmp.Or(opt.ModelScrapeEvery, modelScrapeEvery), opt.TLS) })
	}
	waitErr := s.Wait(wait)
	endRun() // the load, a poll and a scrape in progress stop with the loop phase
	loadWG.Wait()
	duringWG.Wait()
	if waitErr != nil {
		return nil, waitErr
	}
	res.Target = target()

	// The finish, bounded whatever etcd does (a stopped etcd answers
	// nothing): the lease's revoke and the end scrape run alongside the
	// ring's drain, each request within finishTimeout.
	// A traced etcd that exited, or is still stopped (SIGSTOP, a
	// debugger), answers nothing: it is not asked, rather than waited on
	// for finishTimeout; a lease is still revoked through the other
	// members.
	fctx, cancel := context.WithTimeout(context.Background(), finishTimeout)
	defer cancel()
	var fin sync.WaitGroup
	defer fin.Wait() // on the early returns too
	stoppedAtEnd := res.Target.StoppedAtEnd()
	if res.Load != nil {
		if (stoppedAtEnd || res.Target.Exited) && len(members) <= 1 {
			notice(commit.Notice{Kind: commit.NoticeLeaseKept})
		} else {
			fin.Go(func() {
				if err := res.Load.Revoke(fctx); err != nil {
					notice(commit.Notice{Kind: commit.NoticeRevokeFailed, Err: err})
				}
			})
		}
		res.Report.ClientPutNs = res.Load.ClientNs
	}
	var endScrape map[uint64]scrape
	var endErrs map[uint64]error
	endAt := time.Now()
	if startScrape != nil && !res.Target.Exited && !stoppedAtEnd {
		fin.Go(func() { endScrape, endErrs = scrapeAll(fctx, urls, opt.TLS) })
	}
	if tr != nil && !(opt.StopAtOnce && !res.Target.Exited) {
		// Let the last writes' events arrive before the drain.
		time.Sleep(finishSettle)
	}
	// Drain, wait for the readers, read the counters, close.
	err := s.Finish(func() {
		if tr == nil {
			return
		}
		res.Lost, _ = tr.Lost()
		res.Missed = tr.Missed()
		var kdropped uint64
		res.WritesSeen, res.WritesSampled, kdropped, _ = tr.Writes()
		res.Dropped = j.Dropped + asm.Dropped + int(kdropped)
		if opt.Syncs != nil {
			res.SyncLost, _ = opt.Syncs.Lost()
			res.SyncMissed = opt.Syncs.Missed()
		}
	})
	if err != nil {
		return nil, err
	}
	if tr != nil {
		res.DecodeErrors = res.decodeErrors.Load()
		if res.Role == commit.RoleLeader {
			var fol []uint64
			for _, m := range members {
				if m.ID != res.LocalID {
					fol = append(fol, m.ID)
				}
			}
			res.Cluster.Down = j.Silent(fol)
		}
		if opt.Syncs != nil {
			res.SyncCalls = calls.fsyncs()
			res.Report.AddCauses(commit.JoinSyncs(res.syncWins, calls.calls, syncScheds))
		}
		if res.Load != nil {
			slices.SortFunc(res.spans, func(a, b [2]uint64) int { return cmp.Compare(a[1], b[1]) })
			res.ClientOutsideNs = workload.PairClient(res.Load.Intervals, res.spans)
		}
	}
	fin.Wait()
	switch {
	case startErr != nil:
		res.ModelErr = fmt.Errorf("scraping /metrics at the start of the run: %w", startErr)
	case startScrape == nil:
	case res.Target.Exited:
		res.ModelErr = errors.New("the traced etcd exited during the run, and its metrics with it")
	case stoppedAtEnd:
		res.ModelErr = errors.New("the traced etcd was stopped at the end of the run: its /metrics not scraped")
	default:
		res.model(members, urls, startScrape, endScrape, during.latest, endErrs, endAt)
	}
	return res, nil
}

// model computes the model from the start scrape and, per member, the
// end scrape, else its latest during the run (modelEnds); ModelErr says
// why not.
func (res *CommitResult) model(members []etcdmetric.Member, urls []metricsURL, start, end, during map[uint64]scrape, endErrs map[uint64]error, endAt time.Time) {
	ends, used := modelEnds(urls, start, end, during, endErrs, endAt)
	res.ModelScrapes = used
	if len(ends) == 0 {
		res.ModelErr = fmt.Errorf("scraping /metrics at the end of the run (every member at once, within %v), and none answered during it: %w", finishTimeout, oneErr(endErrs))
		return
	}
	startFams := map[uint64]map[string]*dto.MetricFamily{}
	for id, sc := range start {
		startFams[id] = sc.fams
	}
	in, err := modelInput(members, res, startFams, ends)
	if err != nil {
		res.ModelErr = err
		return
	}
	m := commit.Model(in)
	res.Model, res.ModelIn = &m, &in
}

// rolePollEvery is how often a run asks etcd who leads (a leader change
// changes the split), and how long one question may take.
const rolePollEvery = 5 * time.Second

// assembled reports whether k is a record the kernel assembled.
func assembled(k event.CommitKind) bool {
	return k.Assembled()
}

// finishSettle is the finish's wait for the last writes' events to
// arrive before the drain (CommitOptions.StopAtOnce skips it).
const finishSettle = 200 * time.Millisecond

// finishTimeout bounds the requests to etcd once the run is over (the
// lease's revoke, and the end scrape of every member at once), so that commit exits
// within 2 s of a signal even when etcd does not answer.
const finishTimeout = time.Second

// maxKept bounds what a run keeps for the joins at its end: the writes'
// spans (for the load's puts), their WAL sync windows, the fsync calls
// (4 times as many scheduler records): an hour of writes at 25/s, as the
// load's workload.Load.Intervals.
const maxKept = 100000

func deliver(ws []commit.Write, res *CommitResult, opt CommitOptions, entries *commit.EntryLog) error {
	for i := range ws {
		if e, ok := entries.Get(ws[i].Index); ok && ws[i].Index != 0 {
			// The per-write records carry no cause (the summary has
			// it): the commit record stays v 1.
			e.SyncCause = nil
			ws[i].Entry = &e
		}
		res.Report.Add(&ws[i])
		if opt.LoadPerSec > 0 && len(res.spans) < maxKept {
			res.spans = append(res.spans, [2]uint64{ws[i].StartNs, ws[i].EndNs})
		}
		if win := ws[i].WALSyncWindow; opt.Syncs != nil && !opt.EntryCausesOnly && win.EndNs > win.StartNs && len(res.syncWins) < maxKept {
			res.syncWins = append(res.syncWins, win)
		}
		if opt.OnWrite != nil {
			if err := opt.OnWrite(&ws[i], res.Cluster.Names); err != nil {
				return err
			}
		}
	}
	return nil
}

// syncCalls is the sink of the fsync tracer's pipeline in RunCommit: it
// hands each call's split to the entries' streaming join, and, with keep,
// keeps it (at most maxKept) for the join of the writes at the end.
type syncCalls struct {
	entries *commit.EntryLog
	keep    bool
	calls   []commit.SyncCall
}

// fsyncs counts the fsync calls kept (not the writes).
func (s *syncCalls) fsyncs() int {
	n := 0
	for i := range s.calls {
		if !s.calls[i].Write {
			n++
		}
	}
	return n
}

func (s *syncCalls) Fsync(rec *analysis.FsyncRecord) error {
	s.add(commit.SyncCallOf(rec))
	return nil
}

func (s *syncCalls) add(c commit.SyncCall) {
	s.entries.AddSyncCall(c)
	if s.keep && len(s.calls) < maxKept {
		s.calls = append(s.calls, c)
	}
}

// Write keeps the write(2) calls (the WAL encoder's flush before its
// fdatasync), when the tracer follows them.
func (s *syncCalls) Write(rec *analysis.WriteRecord) error {
	s.add(commit.WriteCallOf(rec))
	return nil
}

func roleOf(local, leader uint64) commit.Role {
	switch {
	case leader == 0:
		return ""
	case local == leader:
		return commit.RoleLeader
	}
	return commit.RoleFollower
}

// modelInput builds the model's input from the metrics' deltas over the
// run: means (sum/count), since etcd's histogram buckets are too coarse
// for a p50 of sub-millisecond times. end holds, per member, the scrape
// its window ends on (modelEnds: the end scrape or one from during the
// run): a mean is a ratio of two deltas over one member's own window,
// never divided by a time, so members whose windows end apart combine
// exactly as the means they are (each over its window).
func modelInput(members []etcdmetric.Member, res *CommitResult, start, end map[uint64]map[string]*dto.MetricFamily) (commit.ModelInput, error) {
	in := commit.ModelInput{Voters: len(members), LocalIsLeader: res.LocalID == res.LeaderID}
	mean := func(id uint64, name string, match map[string]string) (commit.Measure, bool) {
		if start[id] == nil { // no scrape at start: no run to take a difference over
			return commit.Measure{}, false
		}
		return histMean(start[id], end[id], name, match, commit.WindowRun, res.Cluster.Names.Of(id))
	}
	const walFsync = "etcd_disk_wal_fsync_duration_seconds"
	const peerRTT = "etcd_network_peer_round_trip_time_seconds"
	if end[res.LeaderID] == nil {
		return in, fmt.Errorf("no /metrics of the leader %s at the end of the run nor during it", res.Cluster.Names.Of(res.LeaderID))
	}
	var ok bool
	if in.LeaderWAL, ok = mean(res.LeaderID, walFsync, nil); !ok {
		return in, fmt.Errorf("no WAL fsync observed by the leader %s during the run", res.Cluster.Names.Of(res.LeaderID))
	}
	in.LeaderWAL.From.OfLeader = true
	in.Apply, _ = mean(res.LeaderID, "etcd_server_apply_duration_seconds", nil)
	for _, m := range members {
		if m.ID == res.LeaderID {
			continue
		}
		f := commit.ModelFollower{ID: m.ID}
		var okF, okR bool
		f.Fsync, okF = mean(m.ID, walFsync, nil)
		// etcd's peer RTT reads about twice the network RTT (one of its
		// probers dials per probe: docs/peers.md); the source says so.
		to := map[string]string{"To": fmt.Sprintf("%x", m.ID)}
		f.RTT, okR = mean(res.LeaderID, peerRTT, to)
		if !okR && okF {
			// etcd observes the peer RTT once per 30 s per prober, so a
			// short run can hold none for a follower that fsynced all
			// along: it is up, and the mean since etcd started stands in.
			f.RTT, okR = histMean(nil, end[res.LeaderID], peerRTT, to, commit.WindowSinceStart, res.Cluster.Names.Of(res.LeaderID))
		}
		if okR {
			f.RTT.From.Prober = true
		}
		f.Down = !okF || !okR
		in.Followers = append(in.Followers, f)
	}
	if !in.LocalIsLeader {
		to := map[string]string{"To": fmt.Sprintf("%x", res.LeaderID)}
		var okR bool
		if in.ForwardRTT, okR = mean(res.LocalID, peerRTT, to); !okR {
			in.ForwardRTT, _ = histMean(nil, end[res.LocalID], peerRTT, to, commit.WindowSinceStart, res.Cluster.Names.Of(res.LocalID))
		}
	}
	return in, nil
}

// promSeries names a series as PromQL does: name{label="value",...},
// labels sorted; name alone without labels.
func promSeries(name string, labels map[string]string) string {
	if len(labels) == 0 {
		return name
	}
	keys := slices.Sorted(maps.Keys(labels))
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%s", k, strconv.Quote(labels[k]))
	}
	b.WriteByte('}')
	return b.String()
}

// histMean is histogram name's mean (series matching match) between
// scrapes s and e of one member (s nil: everything e holds, i.e. since
// that etcd started: window says which), with its source (the series,
// the window, member); false when e is missing or nothing was observed
// between them.
func histMean(s, e map[string]*dto.MetricFamily, name string, match map[string]string, window commit.MeasureWindow, member string) (commit.Measure, bool) {
	if e == nil {
		return commit.Measure{}, false
	}
	c1, s1 := etcdinfo.HistogramTotals(e, name, match)
	var c0, s0 float64
	if s != nil {
		c0, s0 = etcdinfo.HistogramTotals(s, name, match)
	}
	if c1-c0 <= 0 {
		return commit.Measure{}, false
	}
	src := &commit.MetricSource{Series: promSeries(name, match), Window: window, Member: member}
	return commit.Measure{Ns: int64((s1 - s0) / (c1 - c0) * 1e9), From: src}, true
}

// clusterRetryEvery spaces the looks for etcd's member list while its
// client URLs do not answer (CommitOptions.WaitCluster): a member
// starting answers within seconds, and each look waits up to
// etcdinfo.MembersTimeout itself.
const clusterRetryEvery = 5 * time.Second

// discoverCluster is etcdinfo.Discover; with opt.WaitCluster it asks
// again every clusterRetryEvery while the client URLs do not answer
// (etcdinfo.ErrUnreachable: a member still starting, or stopped) and the
// traced process runs, said once (commit.NoticeClusterWait). The run
// stopped (ctx) is the error it was before the wait; the process gone
// while it waits: nil, nil (the run goes on without the cluster and ends
// at once: its target exited, and the caller follows the next one).
func discoverCluster(ctx context.Context, opt CommitOptions, notice func(commit.Notice)) (*etcdinfo.Cluster, error) {
	first, _ := host.StatProcess(opt.PID)
	for said := false; ; said = true {
		cl, err := etcdinfo.Discover(ctx, opt.Endpoints, opt.TLS, opt.PID)
		if err == nil || !opt.WaitCluster || ctx.Err() != nil || !errors.Is(err, etcdinfo.ErrUnreachable) {
			return cl, err
		}
		if !said {
			notice(commit.Notice{Kind: commit.NoticeClusterWait, Err: err, Every: clusterRetryEvery})
		}
		t := time.NewTimer(clusterRetryEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		if st, err := host.StatProcess(opt.PID); err != nil || st.Exited() || st.Start != first.Start {
			return nil, nil
		}
	}
}
