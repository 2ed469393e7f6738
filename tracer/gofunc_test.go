package tracer

import (
	"debug/elf"
	"errors"
	"os"
	"testing"

	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestGoBinary reads the test binary's own pclntab: a function's entry
// and RET offsets are inside its file, an unknown name and a non-Go file
// fail with the errors the commit tracer degrades on.
func TestGoBinary(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenGoBinary(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st, _ := os.Stat(exe)
	fn, err := b.Func("testing.tRunner", b.Arch() == elf.EM_X86_64)
	if err != nil {
		t.Fatal(err)
	}
	if fn.EntryOffset == 0 || fn.EntryOffset >= uint64(st.Size()) {
		t.Errorf("entry offset %#x outside the %d-byte file", fn.EntryOffset, st.Size())
	}
	if b.Arch() == elf.EM_X86_64 {
		f, _ := os.Open(exe)
		defer f.Close()
		for _, off := range fn.RetOffsets {
			var op [1]byte
			if _, err := f.ReadAt(op[:], int64(off)); err != nil || op[0] != 0xc3 {
				t.Errorf("RET offset %#x holds %#x, want 0xc3 (RET)", off, op[0])
			}
			if off <= fn.EntryOffset {
				t.Errorf("RET offset %#x before the entry %#x", off, fn.EntryOffset)
			}
		}
	}
	if _, err := b.Func("no.such.(*Function).name", false); !errors.Is(err, ErrGoFuncNotFound) {
		t.Errorf("unknown function: %v, want ErrGoFuncNotFound", err)
	}
	if _, err := OpenGoBinary("/bin/sh"); !errors.Is(err, ErrNoGoSymbols) {
		t.Errorf("/bin/sh: %v, want ErrNoGoSymbols", err)
	}
}

// TestRegisterABI: the commit probes read Go's register ABI, so an etcd
// built before go1.17 (stack arguments) is refused with an error that
// makes commit fall back to the model; a build without build info is
// taken as recent.
func TestRegisterABI(t *testing.T) {
	for _, c := range []struct {
		goVersion string
		refused   bool
	}{
		{"go1.12.17", true}, {"go1.16.15", true}, {"go1.17", false}, {"go1.17.13", false},
		{"go1.19.8", false}, {"go1.26.8", false}, {"", false}, {"devel +abc", false},
	} {
		err := registerABI(c.goVersion)
		if (err != nil) != c.refused || err != nil && !errors.Is(err, ErrGoFuncNotFound) {
			t.Errorf("%q: %v, want refused %v (ErrGoFuncNotFound)", c.goVersion, err, c.refused)
		}
	}
	if _, err := os.Stat("../bin/etcd34"); err != nil {
		testenv.Missing(t, "no bin/etcd34 (scripts/deps.sh)")
	}
	b, err := OpenGoBinary("../bin/etcd34")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if v := b.GoVersion(); v != "go1.19.8" {
		t.Errorf("bin/etcd34 built with %q, want go1.19.8 (Debian's 3.4.23)", v)
	}
}
