package main

import "github.com/etcdscope/etcdscope/internal/safefile"

// checkCapturePath validates a --capture flag before anything is traced
// (the file itself: pipeline.CreateCapture).
func checkCapturePath(path string) error {
	if err := safefile.CheckDir(path); err != nil {
		return usagef("--capture %s: %v", path, err)
	}
	return nil
}
