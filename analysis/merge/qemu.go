package merge

import (
	"encoding/json"
	"path/filepath"
	"strings"
)

// DriveCache is what QEMU's command line says of one image file's cache
// mode: the only place cache=unsafe shows, since QEMU opens an unsafe
// image exactly as a cache=writeback one (no O_DIRECT, no O_DSYNC) and
// simply never forwards the guest's flushes (BDRV_O_NO_FLUSH).
type DriveCache struct {
	// Path is the image file, absolute (relative names joined to QEMU's
	// working directory) and cleaned.
	Path string `json:"path"`
	// Cache is QEMU's mode name: none, writeback, writethrough,
	// directsync or unsafe. Options given as cache.direct and
	// cache.no-flush (-blockdev, libvirt) are mapped to the same names.
	Cache string `json:"cache"`
}

// QEMU's cache modes as (direct, no-flush) pairs (QEMU's
// docs/system/qemu-block-drivers and bdrv_parse_cache_mode).
func cacheName(direct, noFlush, writethrough bool) string {
	switch {
	case noFlush:
		return "unsafe"
	case direct && writethrough:
		return "directsync"
	case direct:
		return "none"
	case writethrough:
		return "writethrough"
	}
	return "writeback"
}

// maxCmdlineArgs bounds what ParseQEMUCmdline looks at: QEMU command lines
// run to a few hundred arguments (libvirt's included).
const maxCmdlineArgs = 4096

// ParseQEMUCmdline reads the image files and their cache modes from a
// QEMU command line (argv, as /proc/PID/cmdline gives it): `-drive
// file=F,cache=M` (with QEMU's ",," escape for a comma in a name, and
// cache.direct/cache.no-flush), and `-blockdev` in both its key=value and
// its JSON form (libvirt's), where the cache options may sit on the
// protocol node that names the file or on a format node above it (file=
// naming the protocol node). cwd resolves relative file names ("" leaves
// them as given). Drives without a file (empty CD-ROMs, network
// protocols) and options it does not know are skipped; a file named twice
// keeps its first mode. It never fails: a command line it cannot read
// gives nothing.
func ParseQEMUCmdline(argv []string, cwd string) []DriveCache {
	if len(argv) > maxCmdlineArgs {
		argv = argv[:maxCmdlineArgs]
	}
	type node struct {
		file, child                string // filename (protocol node), file= (format node)
		direct, noFlush, setDirect bool
		cacheMode                  string // -drive cache=
		writethrough, setNoFlush   bool
		name                       string
	}
	var nodes []*node
	for i := 0; i+1 < len(argv); i++ {
		opt := strings.TrimPrefix(argv[i], "-") // QEMU accepts -opt and --opt
		opt = strings.TrimPrefix(opt, "-")
		if opt != "drive" && opt != "blockdev" {
			continue
		}
		i++
		kv := map[string]string{}
		if arg := argv[i]; strings.HasPrefix(strings.TrimSpace(arg), "{") {
			flattenJSON(arg, kv)
		} else {
			for _, p := range splitQEMUOpts(arg) {
				k, v, _ := strings.Cut(p, "=")
				kv[k] = v
			}
		}
		n := &node{name: kv["node-name"]}
		switch opt {
		case "drive":
			n.file = kv["file"]
			n.cacheMode = kv["cache"]
		case "blockdev":
			n.file = kv["filename"]
			n.child = kv["file"]
		}
		if n.file == "" {
			n.file = kv["file.filename"] // the protocol node given inline
		}
		if v, ok := kv["cache.direct"]; ok {
			n.direct, n.setDirect = onOff(v), true
		}
		if v, ok := kv["cache.no-flush"]; ok {
			n.noFlush, n.setNoFlush = onOff(v), true
		}
		nodes = append(nodes, n)
	}
	byName := map[string]*node{}
	for _, n := range nodes {
		if n.name != "" {
			byName[n.name] = n
		}
	}
	seen := map[string]bool{}
	var out []DriveCache
	for _, n := range nodes {
		if n.file == "" || strings.Contains(n.file, "://") || strings.HasPrefix(n.file, "json:") {
			continue
		}
		mode := n.cacheMode
		if mode == "" {
			direct, noFlush := n.direct, n.noFlush
			// A format node above this protocol node may carry them
			// (the format node's no-flush is what QEMU obeys).
			for _, up := range nodes {
				if up.child != "" && byName[up.child] == n {
					if up.setNoFlush {
						noFlush = noFlush || up.noFlush
					}
					if up.setDirect {
						direct = direct || up.direct
					}
				}
			}
			mode = cacheName(direct, noFlush, false)
		} else {
			if n.setNoFlush && n.noFlush {
				mode = "unsafe"
			}
		}
		path := n.file
		if cwd != "" && !filepath.IsAbs(path) {
			path = filepath.Join(cwd, path)
		}
		path = filepath.Clean(path)
		if seen[path] {
			continue
		}
		seen[path] = true
		out = append(out, DriveCache{Path: path, Cache: mode})
	}
	return out
}

// splitQEMUOpts splits QEMU's comma-separated option string, where ",,"
// stands for a comma inside a value.
func splitQEMUOpts(s string) []string {
	var out []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == ',' {
			if i+1 < len(s) && s[i+1] == ',' {
				cur.WriteByte(',')
				i++
				continue
			}
			out = append(out, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteByte(s[i])
	}
	return append(out, cur.String())
}

// flattenJSON puts a -blockdev JSON object's scalar members into kv under
// QEMU's dotted names ({"cache":{"no-flush":true}} → cache.no-flush=on).
func flattenJSON(s string, kv map[string]string) {
	var m map[string]any
	if json.Unmarshal([]byte(s), &m) != nil {
		return
	}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			switch v := v.(type) {
			case map[string]any:
				walk(prefix+k+".", v)
			case string:
				kv[prefix+k] = v
			case bool:
				kv[prefix+k] = map[bool]string{true: "on", false: "off"}[v]
			}
		}
	}
	walk("", m)
}

func onOff(v string) bool {
	switch v {
	case "on", "true", "yes", "1":
		return true
	}
	return false
}

// ApplyDriveCaches sets the cache mode of each image the command line
// names (matched by cleaned absolute path) and records where it came
// from; images it does not name keep the mode their open flags gave.
func ApplyDriveCaches(images []Image, drives []DriveCache) {
	for i := range images {
		for _, d := range drives {
			if d.Path == filepath.Clean(images[i].Path) {
				images[i].Cache, images[i].CacheFrom = d.Cache, CacheFromCommandLine
				break
			}
		}
	}
}
