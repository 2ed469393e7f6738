// Package diagnose reads the evidence people already have about an etcd
// cluster — /metrics text (one scrape, two scrapes of a member, scrapes of
// several members), Prometheus HTTP API JSON, etcd server logs (capnslog
// text, zap JSON or console, behind syslog/journald/CRI prefixes), fio
// output (JSON and the human text), etcdctl's check perf, endpoint status
// and endpoint health — and turns it into findings about
// commit latency: WAL fsync and backend commit against etcd's budgets and
// which member is slow, peer RTT per peer (with the two probers' two humps
// where etcd's doubling buckets can show them), heartbeat gaps matched to
// the fsync and RTT evidence of the same window, each with its evidence,
// its uncertainty, what it means for commit latency and the next command.
//
// Every input is recognised by its content (Detect), never its name. The
// package is pure: it reads the bytes handed to it and does no I/O; the
// CLI (etcdscope diagnose) fetches files and URLs. Metrics text goes
// through analysis/etcdmetric (prometheus/common's expfmt behind a
// tolerant clean-up pass); JSON through encoding/json.
package diagnose
