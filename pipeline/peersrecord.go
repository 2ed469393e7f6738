package pipeline

import (
	"bufio"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/internal/safefile"
)

// AppendMetricRecord appends the etcd_peer_metric record to the recording
// --record wrote (etcdmetric.WriteMetricRecord): the comparisons, and the
// local ends of etcdscope's own probe connections.
func AppendMetricRecord(path string, cs []etcdmetric.PeerComparison, own []netip.AddrPort) error {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	if err := etcdmetric.WriteMetricRecord(fh, cs, own); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// PeersRecording is peers' --record sink: it writes each event as it
// comes to a temporary file renamed into place by Commit
// (internal/safefile: never through a planted link, never a partial
// recording); Close removes it unless committed.
type PeersRecording struct {
	fh *safefile.File
	w  *bufio.Writer
}

// NewPeersRecording creates the recording at path (its header written),
// in a temporary file until Commit.
func NewPeersRecording(path string) (*PeersRecording, error) {
	fh, err := safefile.Create(path, 0o644)
	if err != nil {
		return nil, err
	}
	r := &PeersRecording{fh: fh, w: bufio.NewWriter(fh)}
	if err := peers.WriteHeader(r.w, host.MonoToWallNs()); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Peer writes ev as one JSON line (schema peers/v1).
func (r *PeersRecording) Peer(ev *event.Peer) error { return peers.WriteEvent(r.w, *ev) }

// Commit flushes the file and renames it to its path.
func (r *PeersRecording) Commit() error {
	if err := r.w.Flush(); err != nil {
		return err
	}
	return r.fh.Commit()
}

// Close removes the temporary file unless Commit ran, and releases it.
func (r *PeersRecording) Close() { r.fh.Close() }
