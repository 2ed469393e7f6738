package main

import (
	"fmt"

	"github.com/etcdscope/etcdscope/capture"
	"github.com/etcdscope/etcdscope/internal/safefile"
)

// captureFile is a --capture output, written through internal/safefile:
// under a temporary name next to the target, renamed into place at the
// end, so a path another user planted (a link) is never written through
// and a reader never sees half a capture.
type captureFile struct {
	*capture.Writer
	f *safefile.File
}

// checkCapturePath validates a --capture flag before anything is traced.
func checkCapturePath(path string) error {
	if err := safefile.CheckDir(path); err != nil {
		return usagef("--capture %s: %v", path, err)
	}
	return nil
}

func createCapture(path string, h capture.Header) (*captureFile, error) {
	f, err := safefile.Create(path, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--capture: %w", err)
	}
	w, err := capture.NewWriter(f, h)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("--capture: %w", err)
	}
	return &captureFile{Writer: w, f: f}, nil
}

// finish writes the end line and puts the file in place.
func (c *captureFile) finish(end capture.End) error {
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

// abandon removes the temporary file of a run that failed.
func (c *captureFile) abandon() { c.f.Close() }
