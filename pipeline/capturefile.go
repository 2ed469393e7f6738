package pipeline

import (
	"fmt"

	"github.com/etcdscope/etcdscope/capture"
	"github.com/etcdscope/etcdscope/internal/safefile"
)

// CaptureFile is a --capture output, written through internal/safefile:
// under a temporary name next to the target, renamed into place at the
// end, so a path another user planted (a link) is never written through
// and a reader never sees half a capture.
type CaptureFile struct {
	*capture.Writer
	f *safefile.File
}

// CreateCapture opens the capture at path with its header h (the CLI
// checks the path's directory before anything is traced).
func CreateCapture(path string, h capture.Header) (*CaptureFile, error) {
	f, err := safefile.Create(path, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--capture: %w", err)
	}
	w, err := capture.NewWriter(f, h)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("--capture: %w", err)
	}
	return &CaptureFile{Writer: w, f: f}, nil
}

// Finish writes the end line and puts the file in place.
func (c *CaptureFile) Finish(end capture.End) error {
	err := c.Close(end)
	if err == nil {
		err = c.f.Commit()
	}
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--capture: %w", err)
	}
	return nil
}

// Abandon removes the temporary file of a run that failed.
func (c *CaptureFile) Abandon() { c.f.Close() }
