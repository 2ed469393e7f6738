//go:build vmtest

package guestfio

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ext4Label returns the volume label of the ext4 filesystem on dev, or ""
// (superblock at byte 1024: s_magic 0xEF53 at 0x38, s_volume_name at 0x78).
func ext4Label(dev string) string {
	f, err := os.Open(dev)
	if err != nil {
		return ""
	}
	defer f.Close()
	sb := make([]byte, 1024)
	if _, err := f.ReadAt(sb, 1024); err != nil {
		return ""
	}
	if sb[0x38] != 0x53 || sb[0x39] != 0xef {
		return ""
	}
	return strings.TrimRight(string(sb[0x78:0x88]), "\x00")
}

// TestVMGuestFio runs fio's etcd job (2300-byte appends, fdatasync after
// each) on every drive labelled Label, traced by the guest's etcdscope,
// and prints each recording between markers. Oracle: the recording holds
// exactly as many fio fdatasync calls as fio reports syncs.
func TestVMGuestFio(t *testing.T) {
	var devs []string
	for c := 'a'; c <= 'z'; c++ {
		d := fmt.Sprintf("/dev/vd%c", c)
		if ext4Label(d) == Label {
			devs = append(devs, d)
		}
	}
	if len(devs) == 0 {
		t.Skipf("no drive labelled %s: this test is the guest half of e2e/hypervisor_test.go", Label)
	}
	// The guest clock's source, before and after, and what the kernel said
	// of its clocks: the host test fits one line through the host-guest
	// offsets of all drives, which a change of source mid-run would bend.
	logClock(t, "before")
	defer logClock(t, "after")
	// 1 MiB: ~455 fdatasyncs, a few seconds per drive under TCG.
	const size = "1m"
	for _, dev := range devs {
		name := filepath.Base(dev)
		t.Run(name, func(t *testing.T) {
			mnt := "/mnt/" + name
			if err := os.MkdirAll(mnt, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mount(dev, mnt, "ext4", 0, ""); err != nil {
				t.Fatalf("mount %s: %v", dev, err)
			}
			defer unix.Unmount(mnt, 0)
			dir := filepath.Join(mnt, "fio")
			os.RemoveAll(dir)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			ready := filepath.Join(t.TempDir(), "ready")
			var out bytes.Buffer
			tr := exec.Command("etcdscope", "fsync", "--comm", "fio", "--output", "json", "--interval", "0", "--ready-file", ready)
			tr.Stdout, tr.Stderr = &out, os.Stderr
			if err := tr.Start(); err != nil {
				t.Fatal(err)
			}
			defer tr.Process.Kill()
			for i := 0; ; i++ {
				if _, err := os.Stat(ready); err == nil {
					break
				}
				if i > 600 {
					t.Fatal("etcdscope fsync never wrote its ready file")
				}
				time.Sleep(100 * time.Millisecond)
			}
			start := time.Now()
			fio, err := exec.Command("fio", "--name=etcd", "--directory="+dir, "--rw=write", "--ioengine=sync",
				"--fdatasync=1", "--bs=2300", "--size="+size, "--output-format=json").Output()
			if err != nil {
				t.Fatalf("fio: %v\n%s", err, fio)
			}
			elapsed := time.Since(start)
			tr.Process.Signal(syscall.SIGINT)
			if err := tr.Wait(); err != nil {
				t.Fatalf("etcdscope fsync: %v", err)
			}
			var res struct {
				Jobs []struct {
					Sync struct {
						TotalIOs int64 `json:"total_ios"`
						Lat      struct {
							N int64 `json:"N"`
						} `json:"lat_ns"`
					} `json:"sync"`
				} `json:"jobs"`
			}
			if err := json.Unmarshal(fio[bytes.IndexByte(fio, '{'):], &res); err != nil || len(res.Jobs) != 1 {
				t.Fatalf("fio JSON: %v", err)
			}
			syncs := res.Jobs[0].Sync.TotalIOs
			if syncs == 0 { // fio 3.33 counts fdatasyncs in lat_ns.N only
				syncs = res.Jobs[0].Sync.Lat.N
			}
			var recs, fdatasyncs int
			w := bufio.NewWriterSize(os.Stdout, 1<<20)
			fmt.Fprintf(w, "\nETCDSCOPE-GUEST-BEGIN dev=%s\n", name)
			sc := bufio.NewScanner(&out)
			sc.Buffer(make([]byte, 1<<20), 16<<20)
			for sc.Scan() {
				line := sc.Bytes()
				var head struct{ Type, Comm, Syscall, Path string }
				if json.Unmarshal(line, &head) == nil && head.Type == "fsync" && head.Comm == "fio" &&
					head.Syscall == "fdatasync" && strings.HasPrefix(head.Path, dir) {
					fdatasyncs++
				}
				w.Write(line)
				w.WriteByte('\n')
				recs++
			}
			fmt.Fprintf(w, "ETCDSCOPE-GUEST-END dev=%s records=%d fio_syncs=%d\n", name, recs, syncs)
			w.Flush()
			t.Logf("%s: fio made %d fdatasyncs in %v; the guest tracer recorded %d", dev, syncs, elapsed.Round(time.Millisecond), fdatasyncs)
			if int64(fdatasyncs) != syncs || syncs == 0 {
				t.Errorf("recorded %d fio fdatasyncs on %s, fio reports %d", fdatasyncs, dir, syncs)
			}
		})
	}
}

// logClock logs the guest's current clocksource (when) and the kernel
// log's lines about clocksources and the TSC.
func logClock(t *testing.T, when string) {
	t.Helper()
	cs, _ := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	t.Logf("clocksource %s: %s", when, strings.TrimSpace(string(cs)))
	if when != "after" {
		return
	}
	out, _ := exec.Command("dmesg").Output()
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "clocksource") || strings.Contains(l, "tsc") || strings.Contains(l, "TSC") {
			t.Logf("dmesg: %s", l)
		}
	}
}
