package host

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// SocketOwnerResolver finds which process holds a socket inode off the
// caller's path: Lookup answers from a bounded cache and never touches
// /proc; a miss is queued (bounded) for a background worker. Every
// MinScanInterval at most, the worker looks for what is queued in the fds
// of the last owners it found (etcd holds most peer sockets: a few hundred
// fds), and in all of /proc/*/fd (SocketOwners) only as often as keeps
// that scan under MaxScanShare of a CPU: the full scan costs ~6 µs per
// open fd on the host (BenchmarkSocketOwners: 68 ms at 11k fds). Done
// inline, once a second, it stalled the peers reader, and a reader starved
// to 10% of a CPU lost most of its events; in a goroutine of the same
// cgroup it would still eat that quota (bench/findings.md, section 16).
// Safe for concurrent use.
type SocketOwnerResolver struct {
	cfg   SocketOwnerConfig
	queue chan ownerRequest
	stop  chan struct{}
	done  chan struct{}
	scan  scanner

	mu       sync.Mutex
	cache    map[uint64]SocketOwner // socket inode → holder (PID 0: none found)
	order    []uint64               // cache keys, oldest first (FIFO eviction)
	head     int                    // order[head] is the oldest key
	asked    map[uint64]bool        // queued or being resolved: not queued again
	learned  []LearnedOwner         // owners found for requests, not yet taken
	nLearned atomic.Int32           // len(learned), for HasLearned without the lock
	stats    SocketOwnerStats
	hot      []uint32 // the last owners found, newest first (worker's)

	closeOnce sync.Once
}

// SocketOwner is the process holding a socket: its tgid and comm
// (/proc/PID/comm), or PID 0 and "" when no process held it at the scan
// (closed already, or held by no file).
type SocketOwner struct {
	PID  uint32
	Comm string
}

// LearnedOwner is an owner the worker found for a queued request: the
// caller's Key (the peers tracer's struct sock address) and the socket's
// inode, so that an owner learned after the events that asked for it can
// still be attached to their connection.
type LearnedOwner struct {
	Key   uint64
	Ino   uint64
	Owner SocketOwner
}

// SocketOwnerConfig bounds a SocketOwnerResolver. Zero fields take the
// defaults.
type SocketOwnerConfig struct {
	// QueueLen bounds the inodes waiting for a scan; a miss that finds the
	// queue full is dropped (SocketOwnerStats.QueueDrops) and asked again
	// at the next Lookup of that inode. 0 means 1024.
	QueueLen int
	// MaxEntries bounds the cache of answers (owned and unowned); the
	// oldest is evicted first (SocketOwnerStats.Evicted). 0 means 16384
	// (~1 MiB).
	MaxEntries int
	// MaxLearned bounds the learned owners not yet taken (TakeLearned);
	// more are dropped (SocketOwnerStats.LearnedDrops). 0 means 1024.
	MaxLearned int
	// MinScanInterval is the least time between two look-ups in /proc;
	// 0 means 1 s.
	MinScanInterval time.Duration
	// MaxScanShare bounds the full /proc scans' CPU: after one that used
	// d of CPU (the worker thread's clock: in a throttled cgroup its wall
	// time is many times that), the next waits d/MaxScanShare at least
	// (68 ms at 11k fds: 6.8 s at the default). 0 means 0.01, 1% of a CPU.
	MaxScanShare float64
}

// hotPIDs is how many of the last distinct owners the worker looks in
// before it scans all of /proc.
const hotPIDs = 4

// scanner is where the worker looks: all of /proc (SocketOwners), some
// pids' fds (SocketsOf), a pid's comm, and the worker's CPU clock
// (threadCPU); tests give fakes.
type scanner struct {
	all  func() map[uint64]uint32
	pids func([]uint32) map[uint64]uint32
	comm func(pid uint32) string
	cpu  func() time.Duration
}

// threadCPU is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID,
// ns); the worker is locked to its thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// SocketOwnerStats counts what a SocketOwnerResolver did and dropped.
type SocketOwnerStats struct {
	Hits, Misses uint64 // Lookups answered from the cache, and not
	Queued       uint64 // misses queued for a scan
	QueueDrops   uint64 // misses not queued: the queue was full
	Resolved     uint64 // queued inodes a scan found a holder for
	Unowned      uint64 // queued inodes no process held at the scan
	Evicted      uint64 // cache entries dropped for newer ones
	LearnedDrops uint64 // learned owners dropped: not taken in time
	Scans        uint64 // full /proc scans
	HotScans     uint64 // look-ups in the last owners' fds only
	// LastScanCPUNs and MaxScanCPUNs: CPU time of the last and longest
	// full scan.
	LastScanCPUNs, MaxScanCPUNs uint64
}

type ownerRequest struct{ key, ino uint64 }

// NewSocketOwnerResolver starts the worker; Close stops it.
func NewSocketOwnerResolver(cfg SocketOwnerConfig) *SocketOwnerResolver {
	return newSocketOwnerResolver(cfg, scanner{SocketOwners, SocketsOf, Comm, threadCPU})
}

// newSocketOwnerResolver is NewSocketOwnerResolver with the scans given.
func newSocketOwnerResolver(cfg SocketOwnerConfig, scan scanner) *SocketOwnerResolver {
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 1024
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 16384
	}
	if cfg.MaxLearned <= 0 {
		cfg.MaxLearned = 1024
	}
	if cfg.MinScanInterval <= 0 {
		cfg.MinScanInterval = time.Second
	}
	if cfg.MaxScanShare <= 0 {
		cfg.MaxScanShare = 0.01
	}
	r := &SocketOwnerResolver{
		cfg:   cfg,
		queue: make(chan ownerRequest, cfg.QueueLen),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
		scan:  scan,
		cache: map[uint64]SocketOwner{},
		asked: map[uint64]bool{},
	}
	go r.run()
	return r
}

// Lookup returns the holder of socket inode ino if a scan has answered
// for it (known; PID 0 when none held it), without blocking on /proc.
// Otherwise it queues ino for the worker (at most once until answered;
// key comes back with the answer in TakeLearned) and returns known false:
// the caller reports the owner as unknown, never a guess.
func (r *SocketOwnerResolver) Lookup(key, ino uint64) (o SocketOwner, known bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if o, ok := r.cache[ino]; ok {
		r.stats.Hits++
		return o, true
	}
	r.stats.Misses++
	if r.asked[ino] {
		return SocketOwner{}, false
	}
	select {
	case r.queue <- ownerRequest{key, ino}:
		r.asked[ino] = true
		r.stats.Queued++
	default:
		r.stats.QueueDrops++
	}
	return SocketOwner{}, false
}

// Cached returns the holder of ino if a scan has answered for it, and
// queues nothing: for events of a socket that is closing (its fd is
// likely gone, a scan would find nothing).
func (r *SocketOwnerResolver) Cached(ino uint64) (SocketOwner, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.cache[ino]
	return o, ok
}

// TakeLearned moves the owners found since the last call (PID != 0 only)
// into buf[:0] and returns it.
func (r *SocketOwnerResolver) TakeLearned(buf []LearnedOwner) []LearnedOwner {
	r.mu.Lock()
	defer r.mu.Unlock()
	buf = append(buf[:0], r.learned...)
	r.learned = r.learned[:0]
	r.nLearned.Store(0)
	return buf
}

// HasLearned reports whether TakeLearned would return something: an
// atomic load, cheap enough for every read.
func (r *SocketOwnerResolver) HasLearned() bool { return r.nLearned.Load() > 0 }

// Stats returns the counters so far.
func (r *SocketOwnerResolver) Stats() SocketOwnerStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Close stops the worker (a scan in progress finishes first); Lookup
// still answers from the cache and queues nothing more that is served.
func (r *SocketOwnerResolver) Close() {
	r.closeOnce.Do(func() {
		close(r.stop)
		<-r.done
	})
}

// run waits for requests; at most once per MinScanInterval it takes what
// is queued (up to QueueLen waiting in all), looks for it in the hot
// pids' fds, and when the full scan's share allows, answers the rest
// with one scan of /proc.
func (r *SocketOwnerResolver) run() {
	defer close(r.done)
	runtime.LockOSThread() // threadCPU measures this goroutine's scans
	defer runtime.UnlockOSThread()
	var last, nextFull time.Time
	var pending []ownerRequest
	for {
		if len(pending) == 0 {
			select {
			case <-r.stop:
				return
			case req := <-r.queue:
				pending = append(pending, req)
			}
		}
		if !r.sleepUntil(last.Add(r.cfg.MinScanInterval)) {
			return
		}
	drain:
		for len(pending) < r.cfg.QueueLen {
			select {
			case req := <-r.queue:
				pending = append(pending, req)
			default:
				break drain
			}
		}
		last = time.Now()
		if len(r.hot) > 0 {
			pending = r.resolve(pending, r.scan.pids(r.hot), false, 0)
		}
		if len(pending) > 0 && !time.Now().Before(nextFull) {
			t0 := r.scan.cpu()
			held := r.scan.all()
			took := r.scan.cpu() - t0
			pending = r.resolve(pending, held, true, uint64(took))
			nextFull = time.Now().Add(max(r.cfg.MinScanInterval, time.Duration(float64(took)/r.cfg.MaxScanShare)))
		}
	}
}

// sleepUntil waits until t; false if the resolver was closed meanwhile.
func (r *SocketOwnerResolver) sleepUntil(t time.Time) bool {
	wait := time.Until(t)
	if wait <= 0 {
		return true
	}
	tm := time.NewTimer(wait)
	defer tm.Stop()
	select {
	case <-r.stop:
		return false
	case <-tm.C:
		return true
	}
}

// resolve answers the requests held names an owner for (and, after a
// full scan, the others as unowned) and returns those left waiting, in
// reqs' array. tookNs is the full scan's CPU time.
func (r *SocketOwnerResolver) resolve(reqs []ownerRequest, held map[uint64]uint32, full bool, tookNs uint64) []ownerRequest {
	found := make([]SocketOwner, len(reqs))
	for i, req := range reqs {
		if pid := held[req.ino]; pid != 0 {
			found[i] = SocketOwner{PID: pid, Comm: r.scan.comm(pid)}
			r.hot = append(slices.DeleteFunc(r.hot, func(p uint32) bool { return p == pid }), 0)
			copy(r.hot[1:], r.hot)
			r.hot[0] = pid
			r.hot = r.hot[:min(len(r.hot), hotPIDs)]
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if full {
		r.stats.Scans++
		r.stats.LastScanCPUNs = tookNs
		r.stats.MaxScanCPUNs = max(r.stats.MaxScanCPUNs, tookNs)
	} else {
		r.stats.HotScans++
	}
	left := reqs[:0]
	for i, req := range reqs {
		o := found[i]
		if o.PID == 0 && !full {
			left = append(left, req)
			continue
		}
		delete(r.asked, req.ino)
		r.put(req.ino, o)
		if o.PID == 0 {
			r.stats.Unowned++
			continue
		}
		r.stats.Resolved++
		if len(r.learned) >= r.cfg.MaxLearned {
			r.stats.LearnedDrops++
			continue
		}
		r.learned = append(r.learned, LearnedOwner{Key: req.key, Ino: req.ino, Owner: o})
	}
	r.nLearned.Store(int32(len(r.learned)))
	return left
}

// put caches ino's answer, evicting the oldest entry when full.
func (r *SocketOwnerResolver) put(ino uint64, o SocketOwner) {
	if _, ok := r.cache[ino]; ok {
		r.cache[ino] = o
		return
	}
	if len(r.cache) >= r.cfg.MaxEntries {
		delete(r.cache, r.order[r.head])
		r.order[r.head] = ino
		r.head = (r.head + 1) % len(r.order)
		r.stats.Evicted++
	} else {
		r.order = append(r.order, ino)
	}
	r.cache[ino] = o
}
