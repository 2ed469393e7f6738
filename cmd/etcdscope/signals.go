package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// stopSignals returns a context that ends at the first SIGINT or SIGTERM,
// when a long-running command starts its orderly stop (drain, report,
// detach), and a stop function that stops watching. A second signal while
// that runs exits the process at once with 128+signal, as a shell reports
// it: an operator who presses Ctrl-C twice, or a kubelet's SIGTERM
// followed by a user's, never waits on a slow shutdown. What an exit at once
// leaves (a workload's scratch directory, a netem qdisc, a tracefs mount)
// is what a SIGKILL leaves, and the next start removes it.
func stopSignals() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-sigs:
			n := s.(syscall.Signal)
			fmt.Fprintf(os.Stderr, "etcdscope: second %s: exiting at once\n", unix.SignalName(n))
			os.Exit(128 + int(n))
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
			cancel()
		})
	}
}
