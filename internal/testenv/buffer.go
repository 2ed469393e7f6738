package testenv

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer a test may read while a process or a
// goroutine writes it (a child's stderr, a sink's Log).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
