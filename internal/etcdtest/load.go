package etcdtest

import (
	"bytes"
	"context"
	"fmt"
	"time"
)

// PutKeyPrefix starts every key Put writes.
const PutKeyPrefix = "/etcdtest/put/"

// Put writes n keys (PutKeyPrefix + index) of valueSize bytes each, one at
// a time, starting one put per 1/perSecond seconds (perSecond <= 0: back to
// back). Puts are sequential: a put that takes longer than the interval
// delays the next, so the rate is at most perSecond. Because each put is
// proposed only after the previous one was answered, no two land in one
// Raft batch: with one member each put costs its own WAL fdatasync.
func (c *Cluster) Put(ctx context.Context, n int, perSecond float64, valueSize int) error {
	cli, err := c.client()
	if err != nil {
		return err
	}
	value := string(bytes.Repeat([]byte{'x'}, valueSize))
	var tick <-chan time.Time
	if perSecond > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / perSecond))
		defer t.Stop()
		tick = t.C
	}
	for i := 0; i < n; i++ {
		if tick != nil && i > 0 {
			select {
			case <-tick:
			case <-ctx.Done():
				return fmt.Errorf("put %d of %d: %w", i+1, n, ctx.Err())
			}
		}
		if _, err := cli.Put(ctx, fmt.Sprintf("%s%08d", PutKeyPrefix, i), value); err != nil {
			return fmt.Errorf("put %d of %d: %w", i+1, n, err)
		}
	}
	return nil
}
