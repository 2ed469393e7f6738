package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// runContext is a long-running command's context: the first SIGINT or
// SIGTERM cancels it, and the command finishes in order (drain, report,
// detach) within 2 s; a second one exits at once, status 128+signal,
// after atHardExit (nil or what must not be left behind: the ready file)
// and without the report. stop ends the watch: a signal after it has
// its default effect.
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
			fmt.Fprintf(os.Stderr, "etcdscope %s: second %v: exiting without the report\n", cmd, s)
			if atHardExit != nil {
				atHardExit()
			}
			os.Exit(128 + int(s.(syscall.Signal)))
		case <-quit:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(quit)
		cancel()
	}
}
