package tracer

import (
	"debug/elf"
	"errors"
	"os"
	"testing"
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
