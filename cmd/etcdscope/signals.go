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
	"golang.org/x/sys/unix"
)

// runContext is a long-running command's context: the first SIGINT or
// SIGTERM cancels it, and the command finishes in order (drain, report,
// detach) within 2 s. A second signal while that runs exits the process
// at once with 128+signal, as a shell reports it, after atHardExit (nil,
// or what must not be left behind: the ready file) and without the
// report: an operator who presses Ctrl-C twice, or a kubelet's SIGTERM
// followed by a user's, never waits on a slow shutdown. What an exit at
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
		select {
		case <-sigs:
			cancel()
		case <-quit:
			return
		}
		select {
		case s := <-sigs:
			n := s.(syscall.Signal)
			fmt.Fprintf(os.Stderr, "etcdscope %s: second %s: exiting at once, without the report\n", cmd, unix.SignalName(n))
			if atHardExit != nil {
				atHardExit()
			}
			os.Exit(128 + int(n))
		case <-quit:
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
