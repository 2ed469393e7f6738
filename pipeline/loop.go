package pipeline

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/etcdscope/etcdscope/tracer"
)

// maxConsecutiveErrors ends a loop when the source fails this often in a
// row without yielding one event.
const maxConsecutiveErrors = 1000

// run is the read loop every path shares, and its error policy: read
// into one reused value and hand it to handle until the source ends
// (tracer.ErrClosed, tracer.ErrDrained, io.EOF: nil), handle says stop or
// fails (its error), or the source fails maxConsecutiveErrors times in a
// row. Any other read error is a record lost to decoding: counted in
// decErrs, passed to onDecodeError if set, and the loop goes on.
func run[E any](read func(*E) error, decErrs *atomic.Uint64, onDecodeError func(error), handle func(*E) (stop bool, err error)) error {
	var ev E
	bad := 0
	for {
		if err := read(&ev); err != nil {
			if errors.Is(err, tracer.ErrClosed) || errors.Is(err, tracer.ErrDrained) || errors.Is(err, io.EOF) {
				return nil
			}
			decErrs.Add(1)
			if onDecodeError != nil {
				onDecodeError(err)
			}
			if bad++; bad >= maxConsecutiveErrors {
				return fmt.Errorf("%d reads failed in a row: %w", bad, err)
			}
			continue
		}
		bad = 0
		if stop, err := handle(&ev); err != nil || stop {
			return err
		}
	}
}
