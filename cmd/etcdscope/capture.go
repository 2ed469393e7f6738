package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/etcdscope/etcdscope/capture"
)

// captureFile is a --capture output: written to a new temporary file in
// the target's directory and renamed over the target at the end, so a
// path another user planted (a symlink) is never written through and a
// reader never sees half a capture.
type captureFile struct {
	*capture.Writer
	f    *os.File
	path string
}

// checkCapturePath validates a --capture flag before anything is traced.
func checkCapturePath(path string) error {
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		return usagef("--capture %s: directory %s does not exist", path, filepath.Dir(path))
	}
	if st, err := os.Lstat(path); err == nil && !st.Mode().IsRegular() {
		return usagef("--capture %s exists and is not a regular file; give a new file name", path)
	}
	return nil
}

func createCapture(path string, h capture.Header) (*captureFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, fmt.Errorf("--capture: %w", err)
	}
	w, err := capture.NewWriter(f, h)
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("--capture: %w", err)
	}
	return &captureFile{Writer: w, f: f, path: path}, nil
}

// finish writes the end line and renames the file into place.
func (c *captureFile) finish(end capture.End) error {
	err := c.Close(end)
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(c.f.Name(), c.path)
	}
	if err != nil {
		os.Remove(c.f.Name())
		return fmt.Errorf("--capture: %w", err)
	}
	return nil
}

// abandon removes the temporary file of a run that failed.
func (c *captureFile) abandon() {
	c.f.Close()
	os.Remove(c.f.Name())
}
