package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	vcs := func(rev, modified string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}}, true
		}
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	for _, c := range []struct {
		name, ver, rev string
		read           func() (*debug.BuildInfo, bool)
		want           Info
	}{
		{"ldflags win", "v1.2.3-4-gabc", "abcdef0123456789", vcs("ffff", "false"), Info{"v1.2.3-4-gabc", "abcdef0123456789", "go1.99"}},
		{"vcs stamp", "", "", vcs("0123456789abcdef0123", "true"), Info{"devel-0123456789ab-dirty", "0123456789abcdef0123", "go1.99"}},
		{"go install", "", "", func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v0.9.0"}}, true
		}, Info{"v0.9.0", "unknown", "go1.99"}},
		{"nothing", "", "", none, Info{"devel", "unknown", ""}},
		{"hostile", "v1\n\"x\" " + strings.Repeat("a", 100), "", none, Info{"v1\"x\"" + strings.Repeat("a", 59), "unknown", ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := get(c.ver, c.rev, c.read)
			if c.want.GoVersion == "" {
				c.want.GoVersion = got.GoVersion // runtime.Version()
			}
			if got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
			if len(got.Version) > maxLen {
				t.Errorf("version %d bytes", len(got.Version))
			}
		})
	}
}
