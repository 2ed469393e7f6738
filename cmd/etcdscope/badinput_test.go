package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/merge"
	"github.com/etcdscope/etcdscope/internal/testenv"
	"github.com/etcdscope/etcdscope/pipeline"
)

// TestMain lets the CLI tests run this test binary as etcdscope itself
// (ETCDSCOPE_TEST_MAIN=1): the real main, its real exit code and output,
// without a separate go build.
func TestMain(m *testing.M) {
	if f := os.Getenv("ETCDSCOPE_TEST_FSYNCER"); f != "" {
		os.Exit(fsyncerMain(f))
	}
	if os.Getenv("ETCDSCOPE_TEST_SLEEP") == "1" { // a process to trace (craftedbin_test.go)
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	if os.Getenv("ETCDSCOPE_TEST_MAIN") == "1" {
		rc := run(os.Args[1:])
		if p := os.Getenv("ETCDSCOPE_TEST_HWM"); p != "" {
			st, _ := os.ReadFile("/proc/self/status")
			os.WriteFile(p, st, 0o600) // childPeakRSS reads its VmHWM
		}
		os.Exit(rc)
	}
	os.Exit(m.Run())
}

// badInput is one row of TestBadInput: args (with $D replaced by a
// prepared directory, see prepareBadInputDir) and fix, a phrase of the one
// line the command must print that tells the user what to do instead.
type badInput struct {
	args     []string
	fix      string
	rootOnly bool // the row's setup (a link owned by another user) needs root
}

// badInputs is the one table of bad input for every subcommand. A new
// subcommand adds its rows here: every flag that takes a value gets at
// least one out-of-range or malformed value, every pair of flags that
// conflict gets a row, every file it reads gets a binary/empty/too-long
// input (the $D files; $PID is the test's own pid, a process that is not
// etcd; $HTTP is a local HTTP server that is not Prometheus, see
// notPrometheus), and every file it writes gets a missing directory and a planted
// link ($D/sticky/planted). The row passes when the command
// exits 2 with exactly one line on stderr containing fix, nothing on
// stdout, and the host unchanged (hostState).
var badInputs = slices.Concat([]badInput{
	// etcdscope itself
	{args: []string{"--version", "extra"}, fix: "--version takes no arguments"},
	{args: nil, fix: "give a command"},
	{args: []string{"nosuch"}, fix: "run 'etcdscope help'"},

	// fsync
	{args: []string{"fsync", "--kernel-partition", "--sched"}, fix: "--kernel-partition leaves out the per-request records --sched needs: give one of them"},
	{args: []string{"fsync", "--kernel-partition", "--capture", "/tmp/etcdscope-badinput.cap"}, fix: "records --capture needs"},
	// Off without a word before (the walk of 2026-12-07): its calls' filesystem must be known to be ext4.
	{args: []string{"fsync", "--pid", "1", "--kernel-partition"}, fix: "give --dev with the disk the traced files are on"},
	{args: []string{"fsync", "--workload", "wal", "--rate", "Inf"}, fix: "give appends per second from 0.001"},
	{args: []string{"fsync", "--workload", "wal", "--rate", "NaN"}, fix: "give appends per second from 0.001"},
	{args: []string{"fsync", "--workload", "wal", "--rate", "1e10"}, fix: "give appends per second from 0.001"},
	{args: []string{"fsync", "--workload", "wal", "--rate", "1e-10"}, fix: "give appends per second from 0.001"},
	{args: []string{"fsync", "--workload", "wal", "--rate", "-1"}, fix: "give appends per second from 0.001"},
	{args: []string{"fsync", "--rate", "5"}, fix: "go with --workload wal"},
	{args: []string{"fsync", "--pid", "0"}, fix: "give etcd's (pgrep etcd)"},
	{args: []string{"fsync", "--pid", "-3"}, fix: "is not a process id"},
	{args: []string{"fsync", "--pid", "999999999"}, fix: "pgrep etcd"},
	// --pid $(pgrep -x etcd) on a host with several etcds (a fresh user's run).
	{args: []string{"fsync", "--pid", "$PID", "1"}, fix: "--pid takes one process id and 1 follows it"},
	{args: []string{"commit", "--pid", "$PID", "1"}, fix: "--pid takes one process id and 1 follows it"},
	{args: []string{"fsync", "--qemu", "1", "--pid", "1"}, fix: "drop one of them"},
	{args: []string{"fsync", "--qemu", "1", "--workload", "wal"}, fix: "drop one of them"},
	{args: []string{"fsync", "--qemu", "1", "--writes"}, fix: "drop one of them"},
	{args: []string{"fsync", "--qemu", "0"}, fix: "pgrep qemu"},
	{args: []string{"fsync", "--duration", "-1s"}, fix: "give a positive duration"},
	{args: []string{"fsync", "--duration", "soon"}, fix: "see 'etcdscope fsync --help'"},
	{args: []string{"fsync", "--interval", "-1s"}, fix: "give 0 to turn interval lines off"},
	{args: []string{"fsync", "--min-latency", "5ms"}, fix: "add --output json"},
	{args: []string{"fsync", "--output", "xml"}, fix: "use table or json"},
	{args: []string{"fsync", "--workload", "fio"}, fix: "the built-in workload is wal"},
	{args: []string{"fsync", "--workload", "wal", "--pid", "1"}, fix: "drop --pid"},
	{args: []string{"fsync", "--comm", "a-comm-longer-than-15"}, fix: "give its first 15 bytes"},
	{args: []string{"fsync", "--cgroup", "$D/file"}, fix: "is not on a cgroup v2 filesystem: "}, // where v2 is: TestFsyncCgroupNamesV2Mount
	{args: []string{"fsync", "--dev", "nosuchdisk0"}, fix: "--dev"},
	{args: []string{"fsync", "--ring-size", "1000"}, fix: "must be a power of two"},
	{args: []string{"fsync", "--ready-file", "$D/missing/ready"}, fix: "create it or give another path"},
	{args: []string{"fsync", "--ready-file", "$D/open/ready"}, fix: "give a directory only its owner can change"},
	{args: []string{"fsync", "--ready-file", "$D/sticky/planted/ready"}, fix: "give the real path instead", rootOnly: true},
	// Issue 25: a device node, a FIFO or a link to a pipe at a file flag's
	// path was replaced by a regular file (/dev/null became 6.3 MB).
	{args: []string{"fsync", "--duration", "1s", "--capture", "$D/null"}, fix: "not a regular file: give the path of a regular file", rootOnly: true},
	{args: []string{"fsync", "--duration", "1s", "--capture", "$D/stdout"}, fix: "not a regular file: give the path of a regular file"},
	{args: []string{"fsync", "--duration", "1s", "--ready-file", "$D/null"}, fix: "not a regular file: give the path of a regular file", rootOnly: true},
	{args: []string{"fsync", "--duration", "1s", "--ready-file", "$D/fifo"}, fix: "not a regular file: give the path of a regular file"},
	{args: []string{"fsync", "--workload", "wal", "--dir", "$D/missing"}, fix: "is not an existing directory: create it (mkdir -p $D/missing) on the disk to test, or give one that exists"},
	// A gate over tmpfs passed: fdatasync there reaches no disk.
	{args: []string{"fsync", "--workload", "wal", "--fail-over-budget", "--dir", "/dev/shm"}, fix: "give a --dir on the disk etcd's data directory will use"},
	{args: []string{"fsync", "--workload", "wal", "--dir", "$D/open"}, fix: "give a directory only its owner can change"},
	{args: []string{"fsync", "--workload", "wal", "--dir", "$D/sticky/planted"}, fix: "give the real path instead", rootOnly: true},
	{args: []string{"fsync", "extra"}, fix: "see 'etcdscope fsync --help'"},
	{args: []string{"fsync", "--pid", ""}, fix: "--pid is empty: did the pgrep that gave it match no process?"},
	{args: []string{"commit", "--pid", ""}, fix: "--pid is empty: did the pgrep that gave it match no process?"},
	// Issue 25: '' given for a filter quietly meant "every process".
	{args: []string{"fsync", "--duration", "1s", "--cgroup", ""}, fix: "--cgroup is empty: give a value, or leave the flag out"},
	{args: []string{"fsync", "--duration", "1s", "--comm", ""}, fix: "--comm is empty: give a value, or leave the flag out"},

	// commit (a --comm no process has: the rows must fail before that)
	{args: []string{"commit"}, fix: "give --pid PID (pgrep -x etcd) or --comm etcd"},
	{args: []string{"commit", "--comm", "no-such-etcd", "--load", "NaN/s"}, fix: "0 < N <= 1000"},
	{args: []string{"commit", "--comm", "no-such-etcd", "--load", "Inf/s"}, fix: "0 < N <= 1000"},
	{args: []string{"commit", "--comm", "no-such-etcd", "--load", "-5/s"}, fix: "0 < N <= 1000"},
	{args: []string{"commit", "--comm", "no-such-etcd", "--load", "20/s"}, fix: "--load needs --etcd-endpoints"},
	{args: []string{"commit", "--comm", "no-such-etcd", "--etcd-endpoints", "ftp://x"}, fix: "give an http:// or https:// URL"},
	{args: []string{"commit", "--comm", "no-such-etcd", "--duration", "-1s"}, fix: "give e.g. 60s"},
	{args: []string{"commit", "--comm", "no-such-etcd", "--output", "xml"}, fix: "use table or json"},
	{args: []string{"commit", "--comm", "no-such-etcd", "--sample", "0"}, fix: "give N >= 1"},
	{args: []string{"commit", "--comm", "no-such-etcd", "--sample", "4", "--raw-events"}, fix: "drop --sample 4"},
	{args: []string{"commit", "--comm", "no-such-etcd", "--cert", "c.pem"}, fix: "--cert and --key go together"},
	{args: []string{"commit", "--comm", "no-such-etcd", "--ready-file", "$D/missing/r"}, fix: "create it or give another path"},
	{args: []string{"commit", "--comm", "no-such-etcd", "--ready-file", "$D/fifo"}, fix: "not a regular file: give the path of a regular file"},
	{args: []string{"commit", "--comm", "no-such-etcd", "--etcd-endpoints", ""}, fix: "--etcd-endpoints is empty: give a value, or leave the flag out"},
	{args: []string{"commit", "--comm", "etcd", "--pid", "1"}, fix: "give --pid or --comm, not both"},
	{args: []string{"fsync", "--comm", "etcd", "--pid", "1"}, fix: "give --pid or --comm, not both"},
	{args: []string{"commit", "--comm", "a-comm-longer-than-15"}, fix: "15-byte comm"},
	{args: []string{"commit", "--pid", "$PID", "--duration", "1s"}, fix: "not an etcd this etcdscope can probe; give etcd's pid (pgrep -x etcd), or --etcd-endpoints"},
	// With --etcd-endpoints the binary is still checked first: a process
	// that is no etcd and serves none of the URLs is the mistake, not the URL.
	{args: []string{"commit", "--pid", "$PID", "--etcd-endpoints", "http://127.0.0.1:1", "--duration", "1s"}, fix: "not an etcd this etcdscope can probe, and it serves none of --etcd-endpoints http://127.0.0.1:1; give etcd's pid (pgrep -x etcd)"},
	{args: []string{"commit", "--comm", "no-such-etcd"}, fix: "no such process is running (pgrep -x no-such-etcd finds none): start it first, or give --pid"},

	// completion
	{args: []string{"completion"}, fix: "etcdscope completion bash"},
	{args: []string{"completion", "fish"}, fix: "etcdscope completion bash"},

	// hypervisor
	{args: []string{"hypervisor"}, fix: "give --pid PID"},
	{args: []string{"hypervisor", "--pid", "1", "--comm", "qemu"}, fix: "give one of them"},
	{args: []string{"hypervisor", "--pid", "0"}, fix: "pgrep qemu"},
	{args: []string{"hypervisor", "--pid", "-1"}, fix: "is not a process id"},
	{args: []string{"hypervisor", "--pid", "999999999"}, fix: "pgrep qemu"},
	// A README walk gave etcd's pid: its WAL and db were listed as raw
	// images. $PID, the test binary, is no QEMU either.
	{args: []string{"hypervisor", "--pid", "$PID", "--duration", "1s"}, fix: "is not a QEMU process (exe \"etcdscope.test\", comm \"etcdscope.test\""},
	{args: []string{"fsync", "--qemu", "$PID", "--duration", "1s"}, fix: "--qemu $PID is not a QEMU process"},
	{args: []string{"hypervisor", "--comm", "qemu-system-x86_64-long"}, fix: "give its first 15 bytes"},
	{args: []string{"hypervisor", "--comm", "qemu", "--output", "yaml"}, fix: "use table or json"},
	{args: []string{"hypervisor", "--comm", "qemu", "--duration", "-2s"}, fix: "give e.g. 30s"},
	{args: []string{"hypervisor", "--comm", "qemu", "--ring-size", "3"}, fix: "must be a power of two"},
	{args: []string{"hypervisor", "--comm", "qemu", "--ready-file", "$D/missing/r"}, fix: "create it or give another path"},
	{args: []string{"hypervisor", "--duration", "1s", "--comm", "qemu", "--ready-file", "$D/null"}, fix: "not a regular file: give the path of a regular file", rootOnly: true},

	// serve
	{args: []string{"serve", "--port", "0"}, fix: "give 1-65535"},
	{args: []string{"serve", "--port", "70000"}, fix: "give 1-65535"},
	{args: []string{"serve", "--pid", "0"}, fix: "pgrep etcd"},
	{args: []string{"serve", "--listen", "0.0.0.0:9101"}, fix: "add --listen-public"},
	{args: []string{"serve", "--listen", "nohostport"}, fix: "give host:port"},
	{args: []string{"serve", "--listen", "127.0.0.1:99999"}, fix: "not a number in 0-65535"},
	{args: []string{"serve", "--compare-window", "1s"}, fix: "give 1m or more"},
	{args: []string{"serve", "--data-dir", "/no/such/dir"}, fix: "give etcd's --data-dir"},
	{args: []string{"serve", "--commit-pid", "-3"}, fix: "is not a process id"},
	{args: []string{"serve", "--commit-pid", "999999999"}, fix: "no such process (see pgrep -x etcd)"},
	{args: []string{"serve", "--commit-pid", "1", "--commit-comm", "etcd"}, fix: "give --commit-pid or --commit-comm, not both"},
	{args: []string{"serve", "--commit-pid", "1", "--commit-sample", "0"}, fix: "give N >= 1"},
	{args: []string{"serve", "--commit-pid", "1", "--commit-duty", "10s"}, fix: "give ON/PERIOD, e.g. 10s/60s"},
	{args: []string{"serve", "--commit-pid", "1", "--commit-duty", "60s/10s"}, fix: "give ON <= PERIOD"},
	{args: []string{"serve", "--commit-pid", "1", "--commit-duty", "0s/10s"}, fix: "give ON of at least 1s"},
	{args: []string{"serve", "--commit-pid", "1", "--commit-duty", "-5s/10s"}, fix: "give ON of at least 1s"},
	{args: []string{"serve", "--commit-pid", "1", "--commit-duty", "ten/60s"}, fix: "ON and PERIOD are durations"},
	{args: []string{"serve", "--commit-duty", "10s/60s"}, fix: "give one, or drop --commit-duty"},
	{args: []string{"serve", "--commit-pid", "1", "--etcd-endpoints", "http://127.0.0.1:2379", "--otlp-endpoint", "http://127.0.0.1:4317"}, fix: "has a scheme: give host:port"},
	{args: []string{"serve", "--commit-pid", "1", "--etcd-endpoints", "http://127.0.0.1:2379", "--otlp-endpoint", "collector"}, fix: "is not host:port, e.g. 127.0.0.1:4317"},
	{args: []string{"serve", "--commit-pid", "1", "--etcd-endpoints", "http://127.0.0.1:2379", "--otlp-endpoint", ":4317"}, fix: "has no host"},
	{args: []string{"serve", "--commit-pid", "1", "--etcd-endpoints", "http://127.0.0.1:2379", "--otlp-endpoint", "127.0.0.1:0"}, fix: "not a number in 1-65535"},
	{args: []string{"serve", "--commit-pid", "1", "--etcd-endpoints", "http://127.0.0.1:2379", "--otlp-endpoint", "127.0.0.1:4317", "--otlp-sample-every", "0"}, fix: "give N >= 1 (1 write in N by Raft index"},
	{args: []string{"serve", "--commit-pid", "1", "--etcd-endpoints", "http://127.0.0.1:2379", "--otlp-endpoint", "127.0.0.1:4317", "--otlp-min-duration", "-1ms"}, fix: "give 0 or a positive duration"},
	{args: []string{"serve", "--commit-pid", "1", "--otlp-endpoint", "127.0.0.1:4317"}, fix: "needs --etcd-endpoints"},
	{args: []string{"serve", "--otlp-endpoint", "127.0.0.1:4317"}, fix: "exports the writes of --commit-pid (or --commit-comm): give one"},
	{args: []string{"serve", "--otlp-sample-every", "10"}, fix: "go with --otlp-endpoint host:port"},
	{args: []string{"serve", "--otlp-header", "authorization=Bearer x"}, fix: "go with --otlp-endpoint host:port"},
	{args: []string{"serve", "--otlp-header-file", "$D/file"}, fix: "go with --otlp-endpoint host:port"},
	{args: []string{"serve", "--otlp-ca", "$D/file"}, fix: "go with --otlp-endpoint host:port"},
	{args: []string{"serve", "--commit-pid", "1", "--etcd-endpoints", "http://127.0.0.1:2379", "--otlp-endpoint", "127.0.0.1:4317", "--otlp-header", "Bearer s3cret"}, fix: "give key=value, e.g. authorization=Bearer TOKEN"},
	{args: []string{"serve", "--commit-pid", "1", "--etcd-endpoints", "http://127.0.0.1:2379", "--otlp-endpoint", "127.0.0.1:4317", "--otlp-header", "grpc-timeout=1S"}, fix: "grpc-* keys are gRPC's own"},
	{args: []string{"serve", "--commit-pid", "1", "--etcd-endpoints", "http://127.0.0.1:2379", "--otlp-endpoint", "127.0.0.1:4317", "--otlp-header", "a=1", "--otlp-header", "A=2"}, fix: "\"a\" given twice"},
	{args: []string{"serve", "--commit-pid", "1", "--etcd-endpoints", "http://127.0.0.1:2379", "--otlp-endpoint", "127.0.0.1:4317", "--otlp-insecure", "--otlp-ca", "$D/file"}, fix: "--otlp-ca/--otlp-cert are for TLS: drop --otlp-insecure"},
	{args: []string{"serve", "--commit-pid", "1", "--etcd-endpoints", "http://127.0.0.1:2379", "--otlp-endpoint", "127.0.0.1:4317", "--otlp-cert", "$D/file"}, fix: "--otlp-cert and --otlp-key go together"},
	{args: []string{"serve", "--commit-pid", "1", "--etcd-endpoints", "http://127.0.0.1:2379", "--otlp-endpoint", "127.0.0.1:4317", "--otlp-ca", "$D/file"}, fix: "holds no PEM certificate"},
	{args: []string{"serve", "--commit-pid", "1", "--etcd-endpoints", "http://127.0.0.1:2379", "--otlp-endpoint", "127.0.0.1:4317", "--otlp-ca", "$D/longline"}, fix: "is larger than 1024 KiB: give a PEM file"},
	{args: []string{"serve", "--commit-pid", "1", "--etcd-endpoints", "http://127.0.0.1:2379", "--otlp-endpoint", "127.0.0.1:4317", "--otlp-cert", "$D/file", "--otlp-key", "$D/file"}, fix: "--otlp-cert/--otlp-key: tls: failed to find any PEM data"},
	{args: []string{"serve", "--etcd-metrics", "ftp://x/metrics"}, fix: "give an http:// or https:// URL"},
	{args: []string{"serve", "--etcd-endpoints", "http://127.0.0.1:2379"}, fix: "goes with --etcd-metrics"},
	{args: []string{"serve", "--cert", "c.pem"}, fix: "--cert and --key go together"},
	{args: []string{"serve", "--cacert", "ca.pem"}, fix: "are for --etcd-metrics or --etcd-endpoints: give one of those, or drop them"},
	{args: []string{"commit", "--comm", "no-such-etcd", "--cacert", "ca.pem"}, fix: "are for --etcd-endpoints: give it, or drop them"},
	{args: []string{"serve", "--comm", "etcd", "--pid", "1"}, fix: "give --pid or --comm, not both"},
	{args: []string{"serve", "--comm", ""}, fix: "--comm is empty: give a value, or leave the flag out"},
	{args: []string{"serve", "--ready-file", "$D/missing/ready"}, fix: "create it or give another path"},
	{args: []string{"serve", "--ready-file", "$D/open"}, fix: "give a file name in it"},
	{args: []string{"serve", "--ready-file", "$D/sticky/planted/ready"}, fix: "give the real path instead", rootOnly: true},

	// peers
	{args: []string{"peers", "--port", "0"}, fix: "give 1-65535"},
	{args: []string{"peers", "--peer", "etcd-1"}, fix: "give e.g. 10.0.0.2"},
	{args: []string{"peers", "--duration", "-5s"}, fix: "give e.g. 2m"},
	{args: []string{"peers", "--output", "xml"}, fix: "use table or json"},
	{args: []string{"peers", "--ring-size", "3000"}, fix: "must be a power of two"},
	{args: []string{"peers", "--probe-answer"}, fix: "add --etcd-endpoints"},
	{args: []string{"peers", "--duration", "1s", "--etcd-endpoints", ""}, fix: "--etcd-endpoints is empty: give a value, or leave the flag out"},
	{args: []string{"peers", "--cacert", "ca.pem"}, fix: "are for --etcd-metrics or --etcd-endpoints: give one of those, or drop them"},
	{args: []string{"peers", "--etcd-metrics", "127.0.0.1:2381/metrics"}, fix: "give an http:// or https:// URL"},
	{args: []string{"peers", "--record", "$D/missing/events.jsonl"}, fix: "create it or give another path"},
	{args: []string{"peers", "--record", "$D/sticky/planted/events.jsonl"}, fix: "give the real path instead", rootOnly: true},
	{args: []string{"peers", "--duration", "1s", "--record", "$D/null"}, fix: "not a regular file: give the path of a regular file", rootOnly: true},
	{args: []string{"peers", "--duration", "1s", "--record", "$D/fifo"}, fix: "not a regular file: give the path of a regular file"},
	{args: []string{"peers", "--duration", "1s", "--capture", "$D/stdout"}, fix: "not a regular file: give the path of a regular file"},
	{args: []string{"peers", "--ready-file", "$D/open/ready"}, fix: "give a directory only its owner can change"},
	// Nothing listens on port 1: checked before any probe attaches.
	{args: []string{"peers", "--etcd-endpoints", "http://127.0.0.1:1", "--duration", "1s"}, fix: "check the client URL", rootOnly: true},

	// report
	{args: []string{"report"}, fix: "give one recording file"},
	{args: []string{"report", "$D/missing.jsonl"}, fix: "no such file or directory: give a readable recording"},
	{args: []string{"report", "$D/binary"}, fix: "give a recording written by 'etcdscope fsync --output json'"},
	// Issue 16 opened with report refusing evidence users already have.
	{args: []string{"report", "../../analysis/diagnose/testdata/etcd-12405-node.prom"}, fix: "is an etcd /metrics text, not a recording: run etcdscope diagnose"},
	{args: []string{"report", "../../analysis/diagnose/testdata/etcd-7312-heartbeat.log"}, fix: "is an etcd log, not a recording: run etcdscope diagnose"},
	{args: []string{"report", "$D/longline"}, fix: "give a recording written by 'etcdscope fsync --output json'"},
	{args: []string{"report", "$D/negative.jsonl"}, fix: "total_ns -5 (a call takes 0 to"},
	{args: []string{"report", "$D/overflow.jsonl"}, fix: "total_ns 9223372036854775807 (a call takes 0 to"},
	{args: []string{"report", "--html", "$D/r.html", "$D/negative.jsonl"}, fix: "not a record etcdscope writes"},
	{args: []string{"merge", "--guest", "$D/negative.jsonl", "--host", "$D/good.jsonl"}, fix: "not a record etcdscope writes"},
	{args: []string{"report", "$D/wrongtype.jsonl"}, fix: "give a recording written by 'etcdscope fsync --output json'"},
	{args: []string{"report", "$D/empty"}, fix: "write one with etcdscope fsync --output json"},
	// A real `commit --output json` recording (schema commit/v2) was
	// refused as "schema version 2 is newer than this etcdscope's 1".
	{args: []string{"report", "../../testdata/loopback3/commit.jsonl"}, fix: "is a commit recording (etcdscope commit --output json), not an fsync one"},
	{args: []string{"report", "--html", "$D/r.html", "../../testdata/loopback3/commit.jsonl"}, fix: "is a commit recording"},
	// The new-user walk: a peers recording or capture given where the
	// page's fsync recording goes is refused naming what works with it.
	{args: []string{"report", "../../testdata/loopback3/peers.jsonl"}, fix: "is a peers recording: report replays a peers --capture as a table, or draws a recording on the page (etcdscope report --html OUT.html --peers ../../testdata/loopback3/peers.jsonl FSYNC-RECORDING)"},
	{args: []string{"report", "--html", "$D/r.html", "../../testdata/loopback3/peers.jsonl"}, fix: "give this one with --peers (etcdscope report --html $D/r.html --peers ../../testdata/loopback3/peers.jsonl FSYNC-RECORDING)"},
	{args: []string{"report", "--html", "$D/r.html", "../../testdata/capture/peers.capture.jsonl"}, fix: "--peers ../../testdata/capture/peers.capture.jsonl FSYNC-RECORDING), or without --html for its table"},
	{args: []string{"report", "$D/hypervisor.jsonl"}, fix: "is a hypervisor recording (etcdscope hypervisor --output json), not an fsync one: give it to etcdscope merge --guest GUEST.jsonl --host $D/hypervisor.jsonl"},
	{args: []string{"report", "$D/hvsummary.jsonl"}, fix: "give it to etcdscope merge --guest GUEST.jsonl --host $D/hvsummary.jsonl"},
	{args: []string{"report", "--html", "$D/r.html", "$D/hypervisor.jsonl"}, fix: "is a hypervisor recording"},
	{args: []string{"merge", "--guest", "$D/hypervisor.jsonl", "--host", "$D/hypervisor.jsonl"}, fix: "is a hypervisor recording (etcdscope hypervisor --output json): give it as --host"},
	{args: []string{"report", "--output", "csv", "$D/good.jsonl"}, fix: "use table or json"},
	{args: []string{"report", "--peers", "$D/good.jsonl", "$D/good.jsonl"}, fix: "go with --html"},
	{args: []string{"report", "--html", "$D", "$D/good.jsonl"}, fix: "give a file name"},
	{args: []string{"report", "--html", "$D/missing/r.html", "$D/good.jsonl"}, fix: "create it or give another path"},
	{args: []string{"report", "--html", "$D/sticky/planted/r.html", "$D/good.jsonl"}, fix: "give the real path instead", rootOnly: true},
	{args: []string{"report", "--html", "$D/null", "$D/good.jsonl"}, fix: "not a regular file: give the path of a regular file", rootOnly: true},
	{args: []string{"report", "--html", "$D/stdout", "$D/good.jsonl"}, fix: "not a regular file: give the path of a regular file"},
	// Our own link to a regular file, as /dev/stdout is with stdout
	// redirected to one: refused, never replaced (issue 25).
	{args: []string{"report", "--html", "$D/ownlink", "$D/good.jsonl"}, fix: "is a symbolic link (to "},
	{args: []string{"fsync", "--duration", "1s", "--capture", "$D/ownlink"}, fix: "is a symbolic link (to "},
	{args: []string{"report", "--html", "$D/r.html", "--peers", "$D/binary", "$D/good.jsonl"}, fix: "give a file from etcdscope peers --record or --capture"},
	{args: []string{"report", "--html", "$D/r.html", "--peers", "../../testdata/capture/ext4.capture.jsonl", "$D/good.jsonl"}, fix: "is a fsync capture: give a capture of etcdscope peers --capture, or its --record file"},
	{args: []string{"report", "--html", "$D/r.html", "../../testdata/capture/peers.capture.jsonl"}, fix: "give this one with --peers (etcdscope report --html $D/r.html --peers ../../testdata/capture/peers.capture.jsonl FSYNC-RECORDING)"},
	{args: []string{"report", "--html", "$D/r.html", "--output", "json", "$D/good.jsonl"}, fix: "drop --output"},

	// merge
	{args: []string{"merge"}, fix: "give both --guest"},
	{args: []string{"merge", "--guest", "$D/binary", "--host", "$D/good.jsonl"}, fix: "give a recording from etcdscope fsync --output json"},
	{args: []string{"merge", "--guest", "$D/good.jsonl", "--host", "$D/longline"}, fix: "give a recording from etcdscope hypervisor --output json"},
	{args: []string{"merge", "--guest", "$D/good.jsonl", "--host", "$D/good.jsonl", "--output", "csv"}, fix: "use table or json"},
	{args: []string{"merge", "--guest", "$D/good.jsonl", "--host", "$D/twoimages.jsonl"}, fix: "pick the guest disk's image with --image"},
	// Nothing to pair (exited 1 before, issue 25's new-user check).
	{args: []string{"merge", "--guest", "$D/good.jsonl", "--host", "$D/oneimage.jsonl"}, fix: "of the same VM and time"},

	// netem (--dry-run where the row would otherwise get that far: it must
	// refuse even what it would only print)
	{args: []string{"netem"}, fix: "give a verb"},
	{args: []string{"netem", "frobnicate"}, fix: "use apply, show or clear"},
	{args: []string{"netem", "apply", "--dev", "lo", "--peer", "notanip", "--delay", "1ms"}, fix: "give the far member's, e.g. --peer 10.0.0.3"},
	{args: []string{"netem", "apply", "--dev", "lo", "--peer", "10.0.0.2", "--delay", "1ms", "--port", "0"}, fix: "give 1-65535"},
	{args: []string{"netem", "apply", "--dev", "lo", "--peer", "10.0.0.2", "--delay", "1ms", "--port", "70000"}, fix: "give 1-65535"},
	{args: []string{"netem", "apply", "--dev", "nosuch0", "--peer", "10.0.0.2", "--delay", "1ms", "--dry-run"}, fix: "see ip link"},
	{args: []string{"netem", "apply", "--dev", "lo", "--peer", "10.0.0.2", "--delay", "1000h", "--dry-run"}, fix: "give e.g. 25ms"},
	{args: []string{"netem", "apply", "--dev", "lo", "--peer", "10.0.0.2", "--delay", "25", "--dry-run"}, fix: "write 25ms"},
	{args: []string{"netem", "apply", "--dev", "lo", "--peer", "10.0.0.2", "--dry-run"}, fix: "give --delay and/or --loss"},
	{args: []string{"netem", "apply", "--dev", "lo", "--delay", "1ms", "--dry-run"}, fix: "--peer IP is required"},
	{args: []string{"netem", "apply", "--dev", "lo", "--peer", "10.0.0.300", "--delay", "1ms"}, fix: "is not an IP address"},
	{args: []string{"netem", "apply", "--dev", "lo", "--peer", "10.0.0.2", "--loss", "0.1", "--dry-run"}, fix: "needs a % sign"},
	{args: []string{"netem", "apply", "--dev", "lo", "--peer", "10.0.0.2", "--loss", "150%", "--dry-run"}, fix: "outside 0% to 100%"},
	{args: []string{"netem", "apply", "--dev", "lo", "--peer", "10.0.0.2", "--delay", "1ms", "--jitter", "5s", "--dry-run"}, fix: "exceeds netem's limit"},
	{args: []string{"netem", "apply", "--dev", "lo", "--peer", "10.0.0.2", "--delay", "1ms", "--distribution", "zipf", "--dry-run"}, fix: "want one of uniform"},
	{args: []string{"netem", "apply", "--dev", "lo", "--peer", "10.0.0.2", "--delay", "1ms", "--for", "-1m"}, fix: "e.g. --for 10m"},
	{args: []string{"netem", "show", "--netns", "etcdscope-no-such-ns"}, fix: "see `ip netns list`"},
	{args: []string{"netem", "clear", "--dev", "lo", "--netns", "/proc/self/ns/pid"}, fix: "want /proc/PID/ns/net"},
	{args: []string{"netem", "show", "--netns", "$D/good.jsonl"}, fix: "is not a namespace file"},
	// Issue 25: --dry-run printed a plan for a namespace that is not there.
	{args: []string{"netem", "apply", "--dev", "lo", "--peer", "10.0.0.2", "--delay", "1ms", "--dry-run", "--netns", "/nonexistent"}, fix: "no such network namespace"},
	{args: []string{"netem", "apply", "--dev", "lo", "--peer", "10.0.0.2", "--delay", "1ms", "--dry-run", "--netns", "$D/good.jsonl"}, fix: "is not a namespace file"},
	{args: []string{"netem", "apply", "--bogus"}, fix: "see 'etcdscope netem apply --help'"},
	{args: []string{"netem", "clear"}, fix: "--dev is required"},

	// diagnose
	{args: []string{"diagnose"}, fix: "give at least one file or URL"},
	// etcdscope's own outputs are named so, with what reads them (the walk of 2026-12-07).
	{args: []string{"diagnose", "../../testdata/loopback3/commit.jsonl"}, fix: `commit.jsonl: etcdscope's own output (its "commit" lines), not etcd's evidence: its last line is that run's summary`},
	{args: []string{"diagnose", "$D/good.jsonl"}, fix: `good.jsonl: etcdscope's own output (its "fsync" lines), not etcd's evidence: read it with etcdscope report FILE`},
	{args: []string{"diagnose", "--output", "xml", "$D/good.jsonl"}, fix: "use table or json"},
	{args: []string{"diagnose", "--since", "yesterday", "$D/good.jsonl"}, fix: "give an RFC 3339 time"},
	{args: []string{"diagnose", "--since", "2020-01-01T00:00:00Z", "--until", "2019-01-01T00:00:00Z", "$D/good.jsonl"}, fix: "is before --since 2020-01-01T00:00:00Z: no line or sample could be kept; swap them"},
	{args: []string{"diagnose", "--window", "-1s", "$D/good.jsonl"}, fix: "must be positive durations"},
	{args: []string{"diagnose", "$D/missing.txt"}, fix: "give a readable file"},
	{args: []string{"diagnose", "127.0.0.1:2381/metrics"}, fix: "for a URL give its scheme: http://127.0.0.1:2381/metrics"},
	{args: []string{"diagnose", "-", "$D/good.jsonl", "-"}, fix: "- (stdin) given more than once: stdin is read once; save the other inputs to files"},
	{args: []string{"diagnose", "$D/promerror.json"}, fix: "Prometheus answered with an error (bad_data: invalid parameter \"query\": 1:6: parse error: unexpected <op:*>): fix the query"},
	{args: []string{"diagnose", "$D/promempty.json"}, fix: "the query matched no series (an empty result): check the metric name"},
	{args: []string{"diagnose", "$D/binary"}, fix: "give one of those"},
	{args: []string{"diagnose", "$D/longline"}, fix: "cut it to the part that matters"},
	{args: []string{"diagnose", "--window", "1s", "--timeout", "1s", "http://127.0.0.1:1/metrics"}, fix: "reachable from here?"},
	{args: []string{"diagnose", "--prometheus", "http://127.0.0.1:1"}, fix: "is --prometheus its base URL, reachable from here?"},
	{args: []string{"diagnose", "--prometheus", "127.0.0.1:9090"}, fix: "give Prometheus' base URL, e.g. http://prometheus:9090"},
	{args: []string{"diagnose", "--prometheus", "$HTTP"}, fix: "answered /api/v1/query_range with no Prometheus API JSON"},
	{args: []string{"diagnose", "--prometheus", "$HTTP/404"}, fix: "answered HTTP 404 Not Found: not a Prometheus HTTP API; give Prometheus' base URL"},
	{args: []string{"diagnose", "--prometheus", "$HTTP/refuse", "--match", `{job=~"("}`}, fix: "Prometheus refused the query (bad_data: "},
	{args: []string{"diagnose", "--prometheus", "http://127.0.0.1:1", "--last", "6h", "--since", "2020-01-01T00:00:00Z"}, fix: "give either a window (--since/--until) or --last"},
	{args: []string{"diagnose", "--prometheus", "http://127.0.0.1:1", "--last", "-1h"}, fix: "give a positive duration, e.g. 6h"},
	{args: []string{"diagnose", "--prometheus", "http://127.0.0.1:1", "--match", "job=etcd"}, fix: "give label matchers in braces"},
	{args: []string{"diagnose", "--prometheus", "http://127.0.0.1:1", "--max-clusters", "0"}, fix: "--max-clusters 0: give at least 1"},
	{args: []string{"diagnose", "--prometheus", "http://127.0.0.1:1", "$D/good.jsonl"}, fix: "in a run of its own"},
	{args: []string{"diagnose", "--last", "6h", "$D/good.jsonl"}, fix: "--last goes with --prometheus URL"},
	{args: []string{"diagnose", "--prometheus", "http://127.0.0.1:1", "--window", "1m"}, fix: "--window is for /metrics files and URLs, not --prometheus"},

	// check
	{args: []string{"check", "extra"}, fix: "give subcommands among fsync, serve, peers, commit, hypervisor, netem, or none for all"},
	{args: []string{"check", "--verbose"}, fix: "see 'etcdscope check --help'"},
	{args: []string{"check", "--output", "xml"}, fix: "use table or json"},
},
	// Issue 25: every file read from a path the user names is a regular
	// file, read with a bound: --cacert /dev/zero grew past 2 GB and a
	// FIFO blocked forever.
	[]badInput{
		{args: []string{"peers", "--etcd-metrics", "http://127.0.0.1:1/metrics", "--cacert", "$D/longline"}, fix: "is larger than 1024 KiB: give a PEM file"},
		{args: []string{"serve", "--etcd-metrics", "http://127.0.0.1:1/metrics", "--cert", "$D/file", "--key", "$D/longline"}, fix: "is larger than 1024 KiB: give a PEM file"},
	},
	nonRegularInputs("give a PEM file", "peers", "--etcd-metrics", "http://127.0.0.1:1/metrics", "--cacert", "$IN"),
	nonRegularInputs("give a PEM file", "peers", "--etcd-metrics", "http://127.0.0.1:1/metrics", "--cert", "$IN", "--key", "$D/file"),
	nonRegularInputs("give a PEM file", "peers", "--etcd-metrics", "http://127.0.0.1:1/metrics", "--cert", "$D/file", "--key", "$IN"),
	nonRegularInputs("give a PEM file", "serve", "--etcd-metrics", "http://127.0.0.1:1/metrics", "--cacert", "$IN"),
	nonRegularInputs("give a PEM file", "serve", "--etcd-metrics", "http://127.0.0.1:1/metrics", "--cert", "$IN", "--key", "$D/file"),
	nonRegularInputs("give a PEM file", "serve", "--commit-pid", "1", "--etcd-endpoints", "http://127.0.0.1:2379", "--otlp-endpoint", "127.0.0.1:4317", "--otlp-ca", "$IN"),
	nonRegularInputs("give a PEM file", "commit", "--comm", "no-such-etcd", "--etcd-endpoints", "http://127.0.0.1:1", "--cacert", "$IN"),
	nonRegularInputs("give a readable recording (etcdscope fsync --output json > F, or - for stdin)", "report", "$IN"),
	nonRegularInputs("give the output of etcdscope merge --output json", "report", "--html", "$D/r.html", "--merge", "$IN", "$D/good.jsonl"),
	nonRegularInputs("give a file from etcdscope peers --record or --capture", "report", "--html", "$D/r.html", "--peers", "$IN", "$D/good.jsonl"),
	nonRegularInputs("give a recording from etcdscope fsync", "merge", "--guest", "$IN", "--host", "$D/good.jsonl"),
	nonRegularInputs("give a recording from etcdscope hypervisor", "merge", "--guest", "$D/good.jsonl", "--host", "$IN"),
	nonRegularInputs("give a readable file (or - for stdin)", "diagnose", "$IN"),
)

// nonRegularInputs gives one row per input that is not a regular file,
// put in place of $IN in args: /dev/zero (never ends), a FIFO (no writer:
// a read blocks forever) and a directory. Each must be refused naming
// what it is and fix.
func nonRegularInputs(fix string, args ...string) []badInput {
	var rows []badInput
	for _, in := range []string{"/dev/zero", "$D/fifo", "$D/open"} {
		row := badInput{fix: "not a regular file: " + fix}
		for _, a := range args {
			row.args = append(row.args, strings.ReplaceAll(a, "$IN", in))
		}
		rows = append(rows, row)
	}
	return rows
}

// prepareBadInputDir fills dir with the inputs the rows name.
func prepareBadInputDir(t *testing.T, dir string) {
	t.Helper()
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := make([]byte, 4096)
	for i := range bin {
		bin[i] = byte(i*131 + 7)
	}
	write("binary", bin)
	write("longline", append(bytes.Repeat([]byte("x"), 17<<20), '\n'))
	write("wrongtype.jsonl", []byte(`{"type":"fsync","v":1,"total_ns":"slow"}`+"\n"))
	write("empty", nil)
	// The Prometheus HTTP API's error envelope and an empty vector
	// (prometheus.io/docs/prometheus/latest/querying/api/#format-overview).
	write("promerror.json", []byte(`{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:6: parse error: unexpected <op:*>"}`))
	write("promempty.json", []byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`))
	write("file", []byte("x"))
	write("negative.jsonl", []byte(`{"type":"fsync","v":1,"start_ns":1,"end_ns":2,"total_ns":-5,"pid":1,"tid":1,"comm":"etcd","syscall":"fdatasync"}`+"\n"))
	write("overflow.jsonl", []byte(strings.Repeat(`{"type":"fsync","v":1,"start_ns":1,"end_ns":2,"total_ns":9223372036854775807,"pid":1,"tid":1,"comm":"etcd","syscall":"fdatasync"}`+"\n", 2)))
	// A hypervisor recording's lines as `etcdscope hypervisor --output
	// json` encodes them (its writer's types and versions): its
	// hv_summary's "v" is that line's own (2), not the fsync schema's.
	var hv bytes.Buffer
	enc := json.NewEncoder(&hv)
	enc.Encode(merge.HostHeader{Type: "hypervisor", V: merge.SchemaVersion, PID: 9, Comm: "qemu", Clock: "CLOCK_MONOTONIC", StartNs: 1})
	hv.WriteString(`{"type":"fsync","v":1,"start_ns":6,"end_ns":7,"total_ns":1,"pid":9,"tid":9,"comm":"qemu","syscall":"fdatasync","path":"/v/a.img"}` + "\n")
	enc.Encode(merge.HostSummary{Type: "hv_summary", V: merge.HostSummaryVersion, Images: []merge.Image{{Path: "/v/a.img", Flushes: 1}}})
	write("hypervisor.jsonl", hv.Bytes())
	write("hvsummary.jsonl", bytes.SplitAfter(hv.Bytes(), []byte("\n"))[2]) // cut to its last line
	write("good.jsonl", []byte(`{"type":"fsync","v":1,"start_ns":1,"end_ns":2,"total_ns":1,"pid":1,"tid":1,"comm":"etcd","syscall":"fdatasync"}`+"\n"))
	// A hypervisor that wrote two images and flushed only one (the other
	// under cache=unsafe): merge must not pick the flushed one by itself.
	write("twoimages.jsonl", []byte(`{"type":"hypervisor","v":1,"clock":"CLOCK_MONOTONIC","start_ns":1}
{"type":"hv_io","v":1,"op":"pwritev","pid":9,"tid":9,"path":"/v/a.img","fs":"ext4","start_ns":2,"end_ns":3,"ret":4096}
{"type":"hv_io","v":1,"op":"pwritev","pid":9,"tid":9,"path":"/v/b.img","fs":"ext4","start_ns":4,"end_ns":5,"ret":4096}
{"type":"fsync","v":1,"start_ns":6,"end_ns":7,"total_ns":1,"pid":9,"tid":9,"comm":"qemu","syscall":"fdatasync","path":"/v/a.img"}
`))
	write("oneimage.jsonl", []byte(`{"type":"hypervisor","v":1,"clock":"CLOCK_MONOTONIC","start_ns":1}
{"type":"hv_io","v":1,"op":"pwritev","pid":9,"tid":9,"path":"/v/a.img","fs":"ext4","start_ns":2,"end_ns":3,"ret":4096}
{"type":"fsync","v":1,"start_ns":6,"end_ns":7,"total_ns":1,"pid":9,"tid":9,"comm":"qemu","syscall":"fdatasync","path":"/v/a.img"}
`))
	// Non-regular files a file flag must not replace: a FIFO, a link to
	// this process's stdout (a pipe, as /dev/stdout is), and as root a
	// device node, /dev/null's twin (char 1:3).
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/self/fd/1", filepath.Join(dir, "stdout")); err != nil {
		t.Fatal(err)
	}
	write("owned.html", []byte("the operator's page\n"))
	if err := os.Symlink(filepath.Join(dir, "owned.html"), filepath.Join(dir, "ownlink")); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := syscall.Mknod(filepath.Join(dir, "null"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			t.Fatal(err)
		}
	}
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777)
	sticky := filepath.Join(dir, "sticky")
	if err := os.Mkdir(sticky, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(sticky, os.ModeSticky|0o777)
	victim := filepath.Join(dir, "victim")
	os.Mkdir(victim, 0o700)
	planted := filepath.Join(sticky, "planted")
	if err := os.Symlink(victim, planted); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Lchown(planted, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
}

// hostState is what a bad input must not change: BPF objects that outlive
// a process (pinned, attached to tc/XDP or a cgroup), qdiscs, tracefs/debugfs and any
// mounts under the test's directories, the files there, the workload's
// scratch in /var/tmp and etcdscope's state under /run.
func hostState(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	if out, err := exec.Command("tc", "qdisc", "show").CombinedOutput(); err == nil {
		b.WriteString("qdiscs:\n" + string(out))
	}
	if os.Geteuid() == 0 {
		// A BPF object outlives the process that made it only pinned in
		// bpffs or attached where the kernel holds it: tc/XDP (bpftool
		// net) or a cgroup (bpftool cgroup tree). Programs behind perf
		// events die with their fds. (A global `bpftool prog list` is no
		// oracle here: other tests on the machine load and free programs
		// all the time.)
		// Found through testenv so that a missing bpftool fails under
		// ETCDSCOPE_REQUIRE_BPF instead of comparing two "not found"s.
		bpftool := testenv.LookPath(t, "bpftool", "bpftool")
		for _, args := range [][]string{{"net", "show"}, {"cgroup", "tree"}} {
			out, _ := exec.Command(bpftool, args...).CombinedOutput()
			b.WriteString("bpftool " + strings.Join(args, " ") + ":\n" + string(out))
		}
		b.WriteString("bpffs: " + listTree("/sys/fs/bpf") + "\n")
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(mi), "\n") {
		if strings.Contains(l, "tracefs") || strings.Contains(l, "debugfs") || strings.Contains(l, dir) {
			b.WriteString("mount: " + l + "\n")
		}
	}
	b.WriteString("dir: " + listTree(dir) + "\n")
	b.WriteString("/run/etcdscope: " + listTree("/run/etcdscope") + "\n")
	ents, _ := os.ReadDir("/var/tmp")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), pipeline.WALScratchPrefix) {
			b.WriteString("/var/tmp/" + e.Name() + "\n")
		}
	}
	return b.String()
}

// listTree lists every path under root with its size and mode.
func listTree(root string) string {
	var out []string
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			out = append(out, fmt.Sprintf("%s %v %d", p, fi.Mode(), fi.Size()))
		}
		return nil
	})
	return strings.Join(out, "; ")
}

// notPrometheus is $HTTP: a web server, not Prometheus: 200 and a page
// of text, 404 under /404, and under /refuse the HTTP API's 400 answer
// to a query that does not parse (what a real Prometheus says to a bad
// --match: e2e TestDiagnosePrometheusFleet).
func notPrometheus(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasPrefix(r.URL.Path, "/404/"):
		http.NotFound(w, r)
	case strings.HasPrefix(r.URL.Path, "/refuse/"):
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:23: parse error: error parsing regexp: missing closing ): `+"`(`"+`"}`)
	default:
		io.WriteString(w, "<html>hello</html>\n")
	}
}

// TestBadInput runs every row of badInputs through the real main (this
// test binary re-executed, see TestMain).
func TestBadInput(t *testing.T) {
	if len(badInputs) < 60 {
		t.Fatalf("%d rows; the table keeps at least 60", len(badInputs))
	}
	dir := t.TempDir()
	prepareBadInputDir(t, dir)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(notPrometheus))
	defer srv.Close()
	subst := strings.NewReplacer("$D", dir, "$PID", strconv.Itoa(os.Getpid()), "$HTTP", srv.URL)
	for _, row := range badInputs {
		args := make([]string, len(row.args))
		for i, a := range row.args {
			args[i] = subst.Replace(a)
		}
		fix := subst.Replace(row.fix)
		name := strings.Join(row.args, " ")
		if name == "" {
			name = "(no arguments)"
		}
		t.Run(name, func(t *testing.T) {
			if row.rootOnly && os.Geteuid() != 0 {
				t.Skip("planting a link owned by another user needs root")
			}
			// Other tests on this machine mount tracefs and load BPF too:
			// a difference is believed only if it happens twice in a row.
			var before, after string
			var stdout, stderr bytes.Buffer
			var rc int
			var err error
			for attempt := 0; attempt < 2; attempt++ {
				before = hostState(t, dir)
				cmd := exec.Command(self, args...)
				cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1")
				stdout.Reset()
				stderr.Reset()
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err = cmd.Run()
				rc = cmd.ProcessState.ExitCode()
				if after = hostState(t, dir); after == before {
					break
				}
			}
			if rc != 2 {
				t.Fatalf("exit %d (%v), want 2; stderr:\n%s", rc, err, stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout not empty:\n%s", stdout.String())
			}
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], fix) {
				t.Errorf("stderr is %d line(s), want one naming the fix %q:\n%s", len(lines), fix, stderr.String())
			}
			if after != before {
				t.Errorf("host changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// TestReportLossUnknown: a recording cut before its summary line reports
// its loss as unknown, in the table and as null in JSON, never as 0.
func TestReportLossUnknown(t *testing.T) {
	dir := t.TempDir()
	prepareBadInputDir(t, dir)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	report := func(args ...string) string {
		cmd := exec.Command(self, append([]string{"report"}, args...)...)
		cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("report %v: %v", args, err)
		}
		return string(out)
	}
	table := report(filepath.Join(dir, "good.jsonl"))
	if !strings.Contains(table, "lost events and missed probe runs unknown: recording has no summary") || strings.Contains(table, "0 lost events") {
		t.Errorf("table:\n%s", table)
	}
	js := report("--output", "json", filepath.Join(dir, "good.jsonl"))
	var rep map[string]any
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatal(err)
	}
	if v, ok := rep["lost_events"]; !ok || v != nil {
		t.Errorf("lost_events = %v (present %v), want null:\n%s", v, ok, js)
	}
	if v, ok := rep["missed_events"]; !ok || v != nil {
		t.Errorf("missed_events = %v, want null", v)
	}
	if s, _ := rep["loss_unknown"].(string); !strings.HasPrefix(s, "unknown: recording has no summary") {
		t.Errorf("loss_unknown = %q", s)
	}
	// With its summary the loss is a number again.
	withSum := filepath.Join(dir, "with-summary.jsonl")
	good, _ := os.ReadFile(filepath.Join(dir, "good.jsonl"))
	os.WriteFile(withSum, append(good, []byte(`{"type":"summary","v":1,"fsyncs":1,"lost_events":1834,"missed_events":0,"groups":[]}`+"\n")...), 0o644)
	if table := report(withSum); !strings.Contains(table, "1834 lost events") {
		t.Errorf("table with summary:\n%s", table)
	}
}

// TestWritesThroughPlantedLinks is the attack, run for real: in a
// sticky, world-writable directory (like /tmp) another user (uid 65534)
// planted links named like the files etcdscope will write, pointing at a
// victim file. Every writer must replace the link, never write through it,
// and the victim must stay unchanged. It also checks that the workload's
// stale scratch is removed at the next start and that every ready file is
// removed at exit.
func TestWritesThroughPlantedLinks(t *testing.T) {
	testenv.RequireRoot(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	prepareBadInputDir(t, dir)
	victim := filepath.Join(dir, "victim", "passwd")
	if err := os.WriteFile(victim, []byte("root:x:0:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unchanged := func(what string) {
		t.Helper()
		if b, err := os.ReadFile(victim); err != nil || string(b) != "root:x:0:0\n" {
			t.Fatalf("%s: victim changed to %d bytes (%v)", what, len(b), err)
		}
	}
	sticky := filepath.Join(dir, "sticky")
	plant := func(name string) string {
		t.Helper()
		p := filepath.Join(sticky, name)
		os.MkdirAll(filepath.Dir(p), 0o777)
		if err := os.Symlink(victim, p); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		return p
	}
	etcdscope := func(args ...string) (string, error) {
		cmd := exec.Command(self, args...)
		cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	isRegular := func(p string) {
		t.Helper()
		if st, err := os.Lstat(p); err != nil || !st.Mode().IsRegular() {
			t.Errorf("%s: %v, %v; want the link replaced by a regular file", p, st, err)
		}
	}
	gone := func(p string) {
		t.Helper()
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s still exists after the run (%v)", p, err)
		}
	}

	// fsync --workload wal: a planted ready file, the planted WAL
	// segment in --dir, and a killed run's scratch.
	ready := plant("fsync.ready")
	plant("member/wal/0000000000000000-0000000000000000.wal")
	stale := filepath.Join(sticky, pipeline.WALScratchPrefix+"killed")
	os.MkdirAll(filepath.Join(stale, "member", "wal"), 0o700)
	os.WriteFile(filepath.Join(stale, "member", "wal", "x.wal"), make([]byte, 1<<20), 0o600)
	fcap := plant("fsync.capture.jsonl")
	out, err := etcdscope("fsync", "--workload", "wal", "--duration", "1s", "--interval", "0", "--dir", sticky, "--ready-file", ready, "--capture", fcap)
	if err != nil {
		t.Fatalf("fsync: %v\n%s", err, out)
	}
	unchanged("fsync --ready-file, --dir and --capture")
	isRegular(fcap)
	gone(ready)
	gone(stale)
	if !strings.Contains(out, "removed "+stale) {
		t.Errorf("fsync did not say it removed the stale scratch:\n%s", out)
	}
	ents, _ := filepath.Glob(filepath.Join(sticky, pipeline.WALScratchPrefix+"*"))
	if len(ents) != 0 {
		t.Errorf("scratch left after the run: %v", ents)
	}

	// report --html over a planted page.
	page := plant("report.html")
	if out, err := etcdscope("report", "--html", page, filepath.Join(dir, "good.jsonl")); err != nil {
		t.Fatalf("report --html: %v\n%s", err, out)
	}
	unchanged("report --html")
	isRegular(page)

	// peers --record and --ready-file (peers must remove its ready file).
	rec, pready, pcap := plant("peers.jsonl"), plant("peers.ready"), plant("peers.capture.jsonl")
	if out, err := etcdscope("peers", "--duration", "1s", "--port", "23807", "--record", rec, "--ready-file", pready, "--capture", pcap); err != nil {
		t.Fatalf("peers: %v\n%s", err, out)
	}
	unchanged("peers --record and --capture")
	isRegular(rec)
	isRegular(pcap)
	gone(pready)

	// hypervisor --ready-file.
	hready := plant("hv.ready")
	if out, err := etcdscope("hypervisor", "--comm", "no-such-qemu", "--duration", "1s", "--ready-file", hready); err != nil {
		t.Fatalf("hypervisor: %v\n%s", err, out)
	}
	unchanged("hypervisor --ready-file")
	gone(hready)

	// serve --ready-file: stopped with SIGTERM once ready.
	sready := plant("serve.ready")
	cmd := exec.Command(self, "serve", "--listen", "127.0.0.1:0", "--comm", "etcd", "--ready-file", sready)
	cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1")
	var serr bytes.Buffer
	cmd.Stderr = &serr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if st, err := os.Lstat(sready); err == nil && st.Mode().IsRegular() {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("serve not ready in 30 s:\n%s", serr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	unchanged("serve --ready-file")
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve: %v\n%s", err, serr.String())
	}
	gone(sready)
}

// TestClosedStdoutLeavesNoScratch: `fsync --workload wal --output json |
// head -1` used to die of SIGPIPE and leave its 65 MB scratch; now the
// write fails, the run ends through its cleanup, and exits 0.
func TestClosedStdoutLeavesNoScratch(t *testing.T) {
	testenv.RequireRoot(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", `"$ETCDSCOPE" fsync --workload wal --duration 10s --output json --dir "$DIR" 2>/dev/null | head -1 >/dev/null; exit ${PIPESTATUS:-0}`)
	cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1", "ETCDSCOPE="+self, "DIR="+dir)
	t0 := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if time.Since(t0) > 8*time.Second {
		t.Errorf("the run went on for %v after its reader left", time.Since(t0))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left in --dir after a closed stdout: %v", ents)
	}
}

// TestReportHTMLFullDisk: report --html onto a disk that fills up midway
// (an 8 KiB tmpfs with 4 KiB left; the page is ~6 KiB) fails with exit 1
// and a line saying so, and leaves no partial page and no temporary file
// behind. In a private mount namespace: the host's mounts are untouched.
func TestReportHTMLFullDisk(t *testing.T) {
	testenv.RequireRoot(t)
	unshare := testenv.LookPath(t, "unshare", "util-linux")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	prepareBadInputDir(t, dir)
	script := `set -e
mkdir "$D/full"
mount -t tmpfs -o size=8k none "$D/full"
head -c 4096 /dev/zero > "$D/full/fill"
set +e
"$ETCDSCOPE" report --html "$D/full/r.html" "$D/good.jsonl" >/dev/null 2>"$D/stderr"
echo "rc=$?"
echo "files: $(ls -A "$D/full" | tr '\n' ' ')"
cat "$D/stderr"
`
	cmd := exec.Command(unshare, "-m", "--propagation", "private", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1", "ETCDSCOPE="+self, "D="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"rc=1\n", "files: fill \n", "--html: write ", "no space left on device"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
}

// TestCommitPtraceRefused: where the kernel refuses reading a process's
// executable to a caller that holds CAP_SYS_PTRACE (another user
// namespace, capabilities the target holds and the caller lacks: pid 1
// on this project's CI machine), `commit --pid` exits 2 with one line
// saying why; it was exit 1 with the bare open error.
func TestCommitPtraceRefused(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := os.Readlink("/proc/1/exe"); !errors.Is(err, os.ErrPermission) {
		t.Skipf("SKIPPED: /proc/1/exe is readable here (%v): the refusal cannot be made", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "commit", "--pid", "1", "--duration", "1s")
	cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run()
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	if rc := cmd.ProcessState.ExitCode(); rc != 2 || len(lines) != 1 || !strings.Contains(lines[0], "despite CAP_SYS_PTRACE") {
		t.Errorf("exit %d, stderr %d line(s), want 2 and one line saying why:\n%s", rc, len(lines), stderr.String())
	}
}

// TestReportHTMLFromCapture: `report --html` draws a capture as it draws
// the recording the capture replays into (it refused a capture before,
// with a two-command recipe): the pages are the same but for the time
// they were generated.
func TestReportHTMLFromCapture(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	capPath := filepath.Join(testenv.RepoRoot(t), "testdata", "capture", "ext4.capture.jsonl")
	main := func(stdout io.Writer, args ...string) {
		t.Helper()
		cmd := exec.Command(self, args...)
		cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1")
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("etcdscope %v: %v\n%s", args, err, stderr.String())
		}
	}
	// The same input name for both pages: the page shows it.
	in := filepath.Join(dir, "in.jsonl")
	b, err := os.ReadFile(capPath)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(in, b, 0o600)
	main(io.Discard, "report", "--html", filepath.Join(dir, "a.html"), in)
	var rec bytes.Buffer
	main(&rec, "report", "--output", "json", capPath)
	os.WriteFile(in, rec.Bytes(), 0o600)
	main(io.Discard, "report", "--html", filepath.Join(dir, "b.html"), in)
	generated := regexp.MustCompile(`Generated [0-9TZ:-]+`)
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return generated.ReplaceAllString(string(b), "Generated T")
	}
	if a, b := read("a.html"), read("b.html"); a != b || !strings.Contains(a, "194 fsync/fdatasync calls") {
		t.Errorf("the capture's page (%d bytes) differs from its recording's (%d bytes), or lacks its 194 calls", len(a), len(b))
	}
}

// TestFsyncCgroupNamesV2Mount: --cgroup on a directory that is not on
// cgroup v2 names where this host mounts the v2 hierarchy (read here from
// /proc/self/mountinfo's " - cgroup2 " line; /sys/fs/cgroup/unified on a
// hybrid host, /sys/fs/cgroup on a unified one), or says there is none and
// to use --pid/--comm; exit 2, one line, as a TestBadInput row.
func TestFsyncCgroupNamesV2Mount(t *testing.T) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	fix := "this host mounts no cgroup v2 hierarchy (cgroup v1 only): select etcd with --pid or --comm instead"
	for _, l := range strings.Split(string(mi), "\n") {
		if _, after, ok := strings.Cut(l, " - "); ok && strings.HasPrefix(after, "cgroup2 ") {
			fix = "give a directory under " + strings.Fields(l)[4] + ", where this host mounts cgroup v2"
			break
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "fsync", "--cgroup", "/proc", "--duration", "1s")
	cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1")
	out, _ := cmd.CombinedOutput()
	t.Logf("%s", out)
	if rc := cmd.ProcessState.ExitCode(); rc != 2 || strings.Count(string(out), "\n") != 1 || !strings.Contains(string(out), "--cgroup /proc is not on a cgroup v2 filesystem: "+fix) {
		t.Errorf("exit %d, want 2 and one line naming %q:\n%s", rc, fix, out)
	}
}
