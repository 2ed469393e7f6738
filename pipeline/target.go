package pipeline

import (
	"context"
	"time"

	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/host"
)

// targetPoll is how often a run reads the traced process's
// /proc/PID/stat: how soon it sees the process exit, and the shortest
// stop it is sure to see.
const targetPoll = 100 * time.Millisecond

// watchTarget follows process pid from now until ctx ends: the periods
// it spends stopped (SIGSTOP, a debugger), and its exit (gone, a zombie,
// or its pid reused), on which it calls exited and stops watching. The
// function returned waits for the watch to end and returns what it saw.
func watchTarget(ctx context.Context, pid int, exited func()) func() commit.Target {
	start := time.Now()
	t := commit.Target{PID: pid}
	first, err := host.StatProcess(pid)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(targetPoll)
		defer tick.Stop()
		var stoppedAt time.Time // zero: not stopped
		endStop := func(now time.Time, ongoing bool) {
			if !stoppedAt.IsZero() {
				t.Stops = append(t.Stops, commit.Stop{AfterNs: int64(stoppedAt.Sub(start)), Ns: int64(now.Sub(stoppedAt)), Ongoing: ongoing})
				stoppedAt = time.Time{}
			}
		}
		for st := first; ; {
			now := time.Now()
			if err != nil || st.Exited() || st.Start != first.Start {
				endStop(now, false)
				t.Exited, t.ExitedAfterNs = true, int64(now.Sub(start))
				exited()
				return
			}
			switch {
			case st.Stopped() && stoppedAt.IsZero():
				stoppedAt = now
			case !st.Stopped():
				endStop(now, false)
			}
			select {
			case <-ctx.Done():
				endStop(time.Now(), true)
				return
			case <-tick.C:
			}
			st, err = host.StatProcess(pid)
		}
	}()
	return func() commit.Target {
		<-done
		return t
	}
}
