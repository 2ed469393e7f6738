package diagnose

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
)

// Kind is what an input was recognised as.
type Kind string

// The kinds of evidence Detect recognises.
const (
	KindMetrics  Kind = "metrics"    // etcd /metrics text (Prometheus exposition)
	KindPromJSON Kind = "prometheus" // Prometheus HTTP API JSON (query or query_range)
	KindLog      Kind = "log"        // etcd server log, text or zap JSON
	KindFioJSON  Kind = "fio-json"   // fio --output-format=json
	KindFioText  Kind = "fio-text"   // fio's human output
	KindEtcdctl  Kind = "etcdctl"    // etcdctl check perf, endpoint status, endpoint health
)

// Input is one piece of evidence: its name (file name or URL, used to name
// a member when the content does not) and its bytes.
type Input struct {
	Name string
	Data []byte
	// At: when the content was fetched (a polled URL); zero for files.
	At time.Time
	// Err: why the caller could not fetch it (a missing file, an
	// unreachable URL); Diagnose lists it as unread and goes on.
	Err error
}

// ErrUnknownContent is returned (wrapped) by Detect for content that is
// none of the kinds.
var ErrUnknownContent = errors.New("not etcd /metrics text, Prometheus API JSON, an etcd log, fio output or etcdctl output (check perf, endpoint status, endpoint health): give one of those")

// ErrNoEvidence is returned (wrapped) for a whole input of a known kind
// that holds nothing to read: a Prometheus answer with status "error", or
// one whose query matched no etcd series. Its message names the fix; the
// input was not cut short.
var ErrNoEvidence = errors.New("no evidence in it")

// MaxJSONObjects bounds the objects (and arrays) a pasted JSON input (fio's
// --output-format=json, etcdctl -w json, a Prometheus API answer) may hold
// before it is decoded: a real fio run of a few jobs holds a few hundred,
// while 256 KB of "{}" in fio's "jobs" decoded to 425 MiB and 1 MB to
// 1.5 GiB (a hostile check, 2026-12-06).
const MaxJSONObjects = 1 << 14

// ErrTooManyObjects is returned for a JSON input of more than
// MaxJSONObjects objects or arrays.
var ErrTooManyObjects = errors.New("more than 16384 JSON objects or arrays: not one fio run, etcdctl answer or Prometheus answer")

var (
	fioTextRe = regexp.MustCompile(`(?m)(^fio-\d|sync percentiles \((?:n|u|m)sec\)|fsync/fdatasync/sync_file_range:|clat percentiles \((?:n|u|m)sec\)|: \(groupid=\d+, jobs=\d+\)|99th percentile of fsync is \d+ ns|"fio version"\s*:|^fio: )`)
	etcdLogRe = regexp.MustCompile(`(sync duration of|slow fdatasync|failed to send out heartbeat on time|took too long|elected leader|became leader at term|lost leader|etcdserver|rafthttp|raft\.node|"msg":|candidate at term|health check for peer|on stream|the connection to peer)`)
)

// Detect tells what data is, by content: JSON objects by their keys (fio's
// "jobs", Prometheus' "resultType", zap's "msg"), text by fio's section
// headers, etcd metric samples or etcd log messages.
func Detect(data []byte) (Kind, error) {
	t := bytes.TrimSpace(data)
	if len(t) == 0 {
		return "", fmt.Errorf("empty: %w", ErrUnknownContent)
	}
	if jsonArrayRe.Match(t) && etcdctlJSON(t) {
		return KindEtcdctl, nil
	}
	if i := bytes.IndexByte(t, '{'); i >= 0 && i < 4096 {
		var probe struct {
			FioVersion *string          `json:"fio version"`
			Jobs       *json.RawMessage `json:"jobs"`
			Status     *string          `json:"status"`
			ErrorType  string           `json:"errorType"`
			Error      string           `json:"error"`
			Data       *struct {
				ResultType string `json:"resultType"`
			} `json:"data"`
		}
		if json.NewDecoder(bytes.NewReader(t[i:])).Decode(&probe) == nil {
			switch {
			case probe.Status != nil && *probe.Status == "error":
				// The HTTP API's error envelope: the query failed, and
				// what Prometheus said is the fix.
				return "", fmt.Errorf("%w: Prometheus answered with an error (%s: %s): fix the query and export its answer again", ErrNoEvidence, probe.ErrorType, probe.Error)
			case probe.Jobs != nil || probe.FioVersion != nil:
				return KindFioJSON, nil
			case probe.Data != nil && probe.Data.ResultType != "":
				return KindPromJSON, nil
			}
		}
	}
	head := t
	if len(head) > 256<<10 {
		head = head[:256<<10]
	}
	switch {
	case fioTextRe.Match(head):
		return KindFioText, nil
	case etcdmetric.LooksLikeMetrics(head):
		return KindMetrics, nil
	case looksLikeEtcdctl(head):
		// Before the log: a paste of etcdctl output often holds
		// etcdctl's own zap warnings ("retrying of unary invoker").
		return KindEtcdctl, nil
	case etcdLogRe.Match(head) && len(ReadLog(Input{Data: head}).Events) > 0:
		return KindLog, nil
	}
	if what := etcdscopeOutput(head); what != "" {
		return "", &OwnOutputError{What: what}
	}
	return "", ErrUnknownContent
}

// OwnOutputError: the input is etcdscope's own output (What: its first
// line's "type", "peer event", or "serve" for serve's /metrics), not
// etcd's evidence; Unread.Own carries What, which render words with the
// command that reads it. It is an ErrUnknownContent.
type OwnOutputError struct{ What string }

func (e *OwnOutputError) Error() string { return "etcdscope_output=" + e.What }

// Is makes an OwnOutputError an ErrUnknownContent.
func (e *OwnOutputError) Is(target error) bool { return target == ErrUnknownContent }

// ownTypes are the "type"s of the first line of etcdscope's JSON Lines
// outputs and captures (fsync, peers --record, commit, cluster, merge,
// hypervisor; docs/schema.md).
var ownTypes = []string{"fsync", "write", "summary", "capture", "peers_recording", "etcd_peer_metric", "commit", "commit_summary",
	"cluster_summary", "merged_fsync", "merge_summary", "hypervisor", "hv_io", "hv_summary"}

// etcdscopeOutput names which of etcdscope's outputs head is ("" when
// none): a JSON line whose "type" is one of ownTypes, or /metrics text
// with etcdscope's metrics and no etcd's.
func etcdscopeOutput(head []byte) string {
	line, _, _ := bytes.Cut(head, []byte("\n"))
	var probe struct {
		Type   string  `json:"type"`
		Kind   string  `json:"kind"`
		Socket *uint64 `json:"socket"`
	}
	if json.Unmarshal(line, &probe) == nil {
		switch {
		case slices.Contains(ownTypes, probe.Type):
			return probe.Type
		case probe.Type == "" && probe.Kind != "" && probe.Socket != nil:
			return "peer event" // a peers recording made before its header
		}
	}
	if bytes.Contains(head, []byte("\netcdscope_")) || bytes.HasPrefix(head, []byte("etcdscope_")) || bytes.Contains(head, []byte("# HELP etcdscope_")) {
		return "serve"
	}
	return ""
}

// etcdctlJSON: a JSON array whose first object is an `endpoint status`
// row ("Endpoint" and "Status") or an `endpoint health` row ("endpoint"
// and "health").
func etcdctlJSON(t []byte) bool {
	var rows []map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(t))
	if dec.Decode(&rows) != nil || len(rows) == 0 {
		return false
	}
	_, ep := rows[0]["Endpoint"]
	_, st := rows[0]["Status"]
	_, ep2 := rows[0]["endpoint"]
	_, h := rows[0]["health"]
	return (ep && st) || (ep2 && h)
}
