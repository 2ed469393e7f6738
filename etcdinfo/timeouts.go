package etcdinfo

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
)

// Timeouts reads the --heartbeat-interval and --election-timeout (ms) of
// the etcd process pid from its command line (/proc/PID/cmdline, as
// --flag=N or --flag N), else its environment (ETCD_HEARTBEAT_INTERVAL,
// ETCD_ELECTION_TIMEOUT); what neither gives is etcd's default. A config
// file (--config-file) is not read: its values are taken as the defaults.
func Timeouts(pid int) etcdmetric.Timeouts {
	t := etcdmetric.DefaultTimeouts
	if pid <= 0 {
		return t
	}
	args := readNulList("/proc/" + strconv.Itoa(pid) + "/cmdline")
	env := readNulList("/proc/" + strconv.Itoa(pid) + "/environ")
	set := func(d *time.Duration, flag, envName string) {
		if v, ok := flagValue(args, flag); ok {
			if ms, err := strconv.ParseUint(v, 10, 32); err == nil && ms > 0 {
				*d, t.FromFlags = time.Duration(ms)*time.Millisecond, true
				return
			}
		}
		for _, e := range env {
			if v, ok := strings.CutPrefix(e, envName+"="); ok {
				if ms, err := strconv.ParseUint(v, 10, 32); err == nil && ms > 0 {
					*d, t.FromFlags = time.Duration(ms)*time.Millisecond, true
				}
			}
		}
	}
	set(&t.Heartbeat, "heartbeat-interval", "ETCD_HEARTBEAT_INTERVAL")
	set(&t.Election, "election-timeout", "ETCD_ELECTION_TIMEOUT")
	return t
}

// flagValue finds --name=V, -name=V, --name V or -name V in args (the
// last one wins, as etcd's flag parsing takes it).
func flagValue(args []string, name string) (string, bool) {
	v, found := "", false
	for i, a := range args {
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if s, ok := strings.CutPrefix(a, name+"="); ok {
			v, found = s, true
		} else if a == name && i+1 < len(args) {
			v, found = args[i+1], true
		}
	}
	return v, found
}

// readNulList reads a NUL-separated /proc file (cmdline, environ), at
// most 1 MiB; nil when unreadable.
func readNulList(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, 1<<20)
	n, _ := f.Read(b)
	var out []string
	for _, p := range bytes.Split(bytes.TrimRight(b[:n], "\x00"), []byte{0}) {
		out = append(out, string(p))
	}
	return out
}
