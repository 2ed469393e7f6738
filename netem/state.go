package netem

import (
	"github.com/etcdscope/etcdscope/internal/safefile"

	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// DefaultStateDir is where apply records what it changed, so that clear
// (even after apply was SIGKILLed) can restore the device.
const DefaultStateDir = "/run/etcdscope/netem"

// stateVersion is bumped when State's meaning changes.
const stateVersion = 1

// State is the JSON file apply writes before it touches a device.
type State struct {
	Version   int       `json:"version"`
	Dev       string    `json:"dev"`
	Ifindex   uint32    `json:"ifindex"`
	NetnsIno  uint64    `json:"netns_ino"` // inode of the network namespace the device is in
	Spec      Spec      `json:"spec"`
	AppliedAt time.Time `json:"applied_at"`
	// Original is the root qdisc that apply replaced (--replace), or nil
	// when the device had its kernel default (handle 0), which deleting
	// our root brings back.
	Original *SavedQdisc `json:"original,omitempty"`
}

// SavedQdisc is a root qdisc as dumped: kind, handle and the raw
// TCA_OPTIONS bytes that recreate it.
type SavedQdisc struct {
	Kind    string `json:"kind"`
	Handle  uint32 `json:"handle"`
	Options []byte `json:"options"` // base64 in JSON
}

// statePath names the state file of dev in the namespace with inode ino.
func statePath(dir string, ino uint64, dev string) string {
	return filepath.Join(dir, fmt.Sprintf("netns%d-%s.json", ino, dev))
}

// writeState writes s atomically (temp file + rename, internal/safefile).
func writeState(path string, s *State) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating state directory: %w", err)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	// Through internal/safefile: a --state-dir where another user planted
	// a link is never written through, and a failure leaves no partial file.
	f, err := safefile.WriteFile(path, append(b, '\n'), 0o644)
	if err != nil {
		return fmt.Errorf("writing state: %w", err)
	}
	return f.Close()
}

// maxStateBytes bounds a state file read back: one is a few hundred bytes
// (a qdisc's options), so 1 MiB is never a real one.
const maxStateBytes = 1 << 20

// readState returns the state at path, or nil if there is none. Only a
// regular file is read, with a bound (safefile.ReadInput): a FIFO planted
// in a --state-dir would block clear, a device would never end.
func readState(path string) (*State, error) {
	b, err := safefile.ReadInput(path, maxStateBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading state: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("decoding state %s: %w", path, err)
	}
	if s.Version != stateVersion {
		return nil, fmt.Errorf("state %s has version %d, this etcdscope reads %d", path, s.Version, stateVersion)
	}
	return &s, nil
}
