// Package buildinfo says which etcdscope this binary is: the version and
// revision the Makefile stamps with -ldflags -X (from `git describe`), or
// else what the Go toolchain recorded (runtime/debug.ReadBuildInfo: the
// module version under `go install ...@v1.2.3`, vcs.revision under a
// plain `go build` in a git checkout).
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by the Makefile: go build -ldflags "-X <pkg>.version=... -X <pkg>.revision=...".
var (
	version  string
	revision string
)

// maxLen bounds each field: the values become Prometheus label values,
// and an -ldflags string or a module version is not ours to trust.
const maxLen = 64

// Info is the identity of the running binary.
type Info struct {
	// Version: `git describe --tags --always --dirty` at build time
	// (e.g. v0.3.0-4-gd6da76a-dirty), a module version, or "devel".
	Version string
	// Revision: the full git commit hash, or "unknown".
	Revision string
	// GoVersion: the toolchain that built the binary (runtime.Version()).
	GoVersion string
}

// Get returns the binary's Info; every field is non-empty, printable and
// at most 64 bytes.
func Get() Info {
	return get(version, revision, debug.ReadBuildInfo)
}

func get(ver, rev string, read func() (*debug.BuildInfo, bool)) Info {
	in := Info{Version: ver, Revision: rev, GoVersion: runtime.Version()}
	if bi, ok := read(); ok {
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if in.Revision == "" {
					in.Revision = s.Value
				}
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if in.Version == "" && in.Revision != "" {
			in.Version = "devel-" + short(in.Revision)
			if modified {
				in.Version += "-dirty"
			}
		}
	}
	in.Version = clean(in.Version, "devel")
	in.Revision = clean(in.Revision, "unknown")
	in.GoVersion = clean(in.GoVersion, "unknown")
	return in
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// clean keeps printable ASCII without spaces, cut to maxLen; empty gives def.
func clean(s, def string) string {
	s = strings.Map(func(r rune) rune {
		if r <= ' ' || r > '~' {
			return -1
		}
		return r
	}, s)
	if len(s) > maxLen {
		s = s[:maxLen]
	}
	if s == "" {
		return def
	}
	return s
}

// String is the --version line: "etcdscope v0.3.0 (revision abc..., go1.26.8, linux/amd64)".
func (in Info) String() string {
	return fmt.Sprintf("etcdscope %s (revision %s, %s, %s/%s)", in.Version, in.Revision, in.GoVersion, runtime.GOOS, runtime.GOARCH)
}
