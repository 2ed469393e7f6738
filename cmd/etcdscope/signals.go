package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/etcdscope/etcdscope/pipeline"
	"github.com/etcdscope/etcdscope/render"
	"golang.org/x/sys/unix"
)

// repeatGap: signals this close to the first are one request. Measured:
// `timeout 0.2` around a process that reports its signals' arrival, 300
// runs at load 4-6 (timeout 9.1): the second SIGTERM reached it as a
// signal of its own in 50 (the kernel merges the rest while pending),
// 71 µs to 2.9 ms after the first (p50 143 µs): 34 times the worst; a
// person's second Ctrl-C comes later than this.
const repeatGap = 100 * time.Millisecond

// runContext is a long-running command's context: the first SIGINT or
// SIGTERM cancels it, and the command finishes in order (drain, report,
// detach) within 2 s. A second signal while that runs exits the process
// at once with 128+signal, as a shell reports it, after atHardExit (nil,
// or what must not be left behind: the ready file) and without the
// report: an operator who presses Ctrl-C twice, or a kubelet's SIGTERM
// followed by a user's, never waits on a slow shutdown. A signal within
// repeatGap of the first is the same request, not a second one: coreutils'
// timeout sends its SIGTERM to the child and then to the child's process
// group, and a job wrapped in `timeout` lost its report to that in 2 of 6
// runs. What an exit at
// once leaves (a workload's scratch directory, a netem qdisc, a tracefs
// mount) is what a SIGKILL leaves, and the next start removes it. stop
// ends the watch (safe to call more than once): a signal after it has its
// default effect.
func runContext(cmd string, atHardExit func()) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	quit := make(chan struct{})
	go func() {
		var first time.Time
		select {
		case <-sigs:
			first = time.Now()
			cancel()
		case <-quit:
			return
		}
		for {
			var s os.Signal
			select {
			case s = <-sigs:
			case <-quit:
				return
			}
			if time.Since(first) < repeatGap {
				continue // the same request, sent twice (timeout's child and group)
			}
			n := s.(syscall.Signal)
			fmt.Fprintln(os.Stderr, render.SecondSignal(cmd, unix.SignalName(n)))
			if atHardExit != nil {
				atHardExit()
			}
			os.Exit(128 + int(n))
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(quit)
			cancel()
		})
	}
}

// newSession is a long-running command's session under runContext: its
// ready file is removed by a second signal's exit at once too. ctx is
// runContext's (it ends at a signal only); defer stop, then s.Close.
func newSession(cmd string, duration time.Duration, readyFile string) (ctx context.Context, s *pipeline.Session, stop func()) {
	var sp atomic.Pointer[pipeline.Session]
	ctx, stop = runContext(cmd, func() {
		if s := sp.Load(); s != nil {
			s.RemoveReady()
		}
	})
	s = pipeline.NewSession(ctx, duration, readyFile)
	sp.Store(s)
	return ctx, s, stop
}
