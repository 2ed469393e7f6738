package pipeline

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/cilium/ebpf/ringbuf"
)

// isEnd reports whether a read error ends the stream: tracer.ErrClosed
// (os.ErrClosed) after Close, tracer.ErrDrained (ringbuf.ErrFlushed) after
// Drain, io.EOF at the end of a capture. The package names them by their
// values rather than importing tracer, so that a sink's package (exporter)
// does not depend on the BPF loaders; pipeline's tests pin the values to
// tracer's.
func isEnd(err error) bool {
	return errors.Is(err, os.ErrClosed) || errors.Is(err, ringbuf.ErrFlushed) || errors.Is(err, io.EOF)
}

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
			if isEnd(err) {
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
