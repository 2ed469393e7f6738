package tracer

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// crafted is a copy of a Go executable (this test's own) whose bytes a
// test forges, as a local user crafts the binary of a process named etcd
// that root's commit or serve reads.
type crafted struct {
	data      []byte
	pcln      *elf.Section
	text      *elf.Section
	pclnShdr  int64 // file offset of .gopclntab's section header
	textShdr  int64
	dataShdrs []int64 // .rodata, .data.rel.ro, .noptrdata, .data
	textStart uint64  // what the table's entries are relative to
	functab   int64   // file offset of the function table
	nfunc     int
}

func (c *crafted) u32(off int64) uint32      { return binary.LittleEndian.Uint32(c.data[off:]) }
func (c *crafted) put32(off int64, v uint32) { binary.LittleEndian.PutUint32(c.data[off:], v) }
func (c *crafted) put64(off int64, v uint64) { binary.LittleEndian.PutUint64(c.data[off:], v) }

// entryAt returns the file offset of function i's entry field.
func (c *crafted) entryAt(i int) int64 { return c.functab + int64(i)*8 }

// funcIndex returns the index of the function whose entry is addr.
func (c *crafted) funcIndex(t *testing.T, addr uint64) int {
	for i := 0; i < c.nfunc; i++ {
		if uint64(c.u32(c.entryAt(i)))+c.textStart == addr {
			return i
		}
	}
	t.Fatalf("no function at %#x", addr)
	return 0
}

// textOff returns the file offset of address a in .text.
func (c *crafted) textOff(a uint64) int64 { return int64(a - c.text.Addr + c.text.Offset) }

func newCrafted(t *testing.T, exe string) *crafted {
	t.Helper()
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := &crafted{data: data, pcln: f.Section(".gopclntab"), text: f.Section(".text")}
	shoff := int64(f.ByteOrder.Uint64(data[0x28:]))
	for i, s := range f.Sections {
		switch s {
		case c.pcln:
			c.pclnShdr = shoff + int64(i)*64
		case c.text:
			c.textShdr = shoff + int64(i)*64
		}
		switch s.Name {
		case ".rodata", ".data.rel.ro", ".noptrdata", ".data":
			c.dataShdrs = append(c.dataShdrs, shoff+int64(i)*64)
		}
	}
	p := int64(c.pcln.Offset)
	if c.u32(p) != 0xfffffff1 {
		t.Skipf("this test's binary has pclntab magic %#x; the forgeries are written for Go 1.20+'s", c.u32(p))
	}
	c.nfunc = int(binary.LittleEndian.Uint64(data[p+8:]))
	c.textStart = textStart(f, data[p:p+int64(c.pcln.Size)], c.text)
	c.functab = p + int64(binary.LittleEndian.Uint64(data[p+64:]))
	return c
}

func (c *crafted) write(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "etcd")
	if err := os.WriteFile(p, c.data, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCraftedGoBinaries forges the Go function table and sections of a
// binary a local user could run as etcd, and reads it as commit does
// (OpenGoBinary, Func with RETs, ReturnSites): no panic, within a time
// and allocation bound, and either an error that commit turns into its
// refusal or the model fallback (ErrNoGoSymbols, ErrGoFuncNotFound,
// ErrGoFuncOutsideText), or probe offsets inside .text and inside the
// function the table names. Before: a function count of 2^32-1 was a
// fatal out-of-memory (debug/gosym made a 412 GB slice), an end before
// the entry a panic (makeslice), an end past .text a 4 GiB buffer, and
// 1.6 M calls to the probed function disassembled an 8 MiB function each.
func TestCraftedGoBinaries(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const name = "testing.tRunner"
	b0, err := OpenGoBinary(exe)
	if err != nil {
		t.Fatal(err)
	}
	target := b0.table.LookupFunc(name)
	// The call floods call a function no code calls (a test, called
	// through a func value), so that only theirs are found.
	const uncalled = "github.com/etcdscope/etcdscope/tracer.TestCraftedGoBinaries"
	flooded := b0.table.LookupFunc(uncalled)
	b0.Close()
	cases := []struct {
		name string
		mut  func(t *testing.T, c *crafted)
	}{
		{"as built", func(t *testing.T, c *crafted) {}},
		{"function count 2^32-1", func(t *testing.T, c *crafted) { c.put64(int64(c.pcln.Offset)+8, 1<<32-1) }},
		{"function count 2^40", func(t *testing.T, c *crafted) { c.put64(int64(c.pcln.Offset)+8, 1<<40) }},
		{"function count 0", func(t *testing.T, c *crafted) { c.put64(int64(c.pcln.Offset)+8, 0) }},
		{"pclntab of 100 bytes", func(t *testing.T, c *crafted) { c.put64(c.pclnShdr+32, 100) }},
		{"pclntab past the file", func(t *testing.T, c *crafted) { c.put64(c.pclnShdr+32, 1<<40) }},
		{"pclntab offsets past it", func(t *testing.T, c *crafted) { c.put64(int64(c.pcln.Offset)+64, 1<<40) }},
		{"magic of Go 1.2", func(t *testing.T, c *crafted) { c.put32(int64(c.pcln.Offset), 0xfffffffb) }},
		{"magic of Go 1.2, built by go1.12", func(t *testing.T, c *crafted) {
			// etcd v3.4's own release builds (go1.12): the table of Go
			// 1.2-1.15 is not read, and the refusal says why (the ABI).
			c.put32(int64(c.pcln.Offset), 0xfffffffb)
			if v := runtime.Version(); len(v) == len("go1.12.1") { // the build info's, same length
				c.data = bytes.ReplaceAll(c.data, []byte(v), []byte("go1.12.1"))
			} else {
				t.Skipf("%s: not the length of go1.12.1", v)
			}
		}},
		{"magic of Go 1.16", func(t *testing.T, c *crafted) { c.put32(int64(c.pcln.Offset), 0xfffffffa) }},
		{"magic of Go 1.18", func(t *testing.T, c *crafted) { c.put32(int64(c.pcln.Offset), 0xfffffff0) }},
		{"magic big-endian", func(t *testing.T, c *crafted) { binary.BigEndian.PutUint32(c.data[c.pcln.Offset:], 0xfffffff1) }},
		{"32-bit pointers", func(t *testing.T, c *crafted) { c.data[c.pcln.Offset+7] = 4 }},
		{"textStart past .text", func(t *testing.T, c *crafted) { c.put64(int64(c.pcln.Offset)+24, c.text.Addr+c.text.Size+4096) }},
		{".text of 0 bytes", func(t *testing.T, c *crafted) { c.put64(c.textShdr+32, 0) }},
		{".text of 4096 bytes", func(t *testing.T, c *crafted) { c.put64(c.textShdr+32, 4096) }},
		{".text of 1 TiB", func(t *testing.T, c *crafted) { c.put64(c.textShdr+32, 1<<40) }},
		{".text moved 64 bytes", func(t *testing.T, c *crafted) { c.put64(c.textShdr+24, c.text.Offset+64) }},
		{"entry past .text", func(t *testing.T, c *crafted) {
			c.put32(c.entryAt(c.funcIndex(t, target.Entry)), uint32(c.text.Size+0x1000))
		}},
		{"end before entry", func(t *testing.T, c *crafted) {
			i := c.funcIndex(t, target.Entry)
			c.put32(c.entryAt(i+1), c.u32(c.entryAt(i))-16)
		}},
		{"end 4 GiB on", func(t *testing.T, c *crafted) {
			c.put32(c.entryAt(c.funcIndex(t, target.Entry)+1), 0xfffffff0)
		}},
		{"entries overlapping", func(t *testing.T, c *crafted) {
			i := c.funcIndex(t, target.Entry)
			c.put32(c.entryAt(i), c.u32(c.entryAt(i-1)))
		}},
		{"the function past .text, in order", func(t *testing.T, c *crafted) {
			// the functions after the target start 2 MiB past .text's
			// end: an ordered table whose target ends there.
			i := c.funcIndex(t, target.Entry)
			for k := i + 1; k <= c.nfunc; k++ {
				c.put32(c.entryAt(k), uint32(c.text.Addr+c.text.Size+2<<20-c.textStart))
			}
		}},
		{"name offset past the names", func(t *testing.T, c *crafted) {
			i := c.funcIndex(t, target.Entry)
			c.put32(c.functab+int64(c.u32(c.entryAt(i)+4))+4, 0xfffffff0)
		}},
		{"func record past the table", func(t *testing.T, c *crafted) {
			c.put32(c.entryAt(c.funcIndex(t, target.Entry))+4, 0xfffffff0)
		}},
		{"8 MiB of calls to it in one function", func(t *testing.T, c *crafted) { callFlood(t, c, flooded, 8<<20) }},
		{"8 MiB of calls to it in functions of 256 KiB", func(t *testing.T, c *crafted) { callFlood(t, c, flooded, MaxGoFuncBytes) }},
		{"8 MiB of calls to it in functions of 64 KiB", func(t *testing.T, c *crafted) { callFlood(t, c, flooded, 64<<10) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := name
			if strings.Contains(tc.name, "calls to it") {
				name = uncalled
			}
			c := newCrafted(t, exe)
			tc.mut(t, c)
			p := c.write(t)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			fn, sites, err := readCrafted(p, name)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%v in %v, %d MiB allocated", err, took.Round(time.Millisecond), alloc>>20)
			if took > 5*time.Second || alloc > 128<<20 {
				t.Errorf("took %v and allocated %d MiB: want within 5 s and 128 MiB", took, alloc>>20)
			}
			if strings.Contains(tc.name, "go1.12") && !strings.Contains(fmt.Sprint(err), "Go's register ABI came with go1.17") {
				t.Errorf("%v: want the register ABI named", err)
			}
			if err != nil {
				if !errors.Is(err, ErrNoGoSymbols) && !errors.Is(err, ErrGoFuncNotFound) && !errors.Is(err, ErrGoFuncOutsideText) {
					t.Errorf("%v: not an error commit refuses or falls back on", err)
				}
				if tc.name == "as built" {
					t.Fatal(err)
				}
				return
			}
			// Every probe lies in .text, inside the function the
			// table names: the entry at the table's entry (or past its
			// stack check), a RET or return site within it.
			f, _ := elf.Open(p)
			defer f.Close()
			text := f.Section(".text")
			lo, hi := text.Offset, text.Offset+text.Size
			for _, off := range append(append([]uint64{fn.EntryOffset}, fn.RetOffsets...), sites...) {
				if off < lo || off >= hi {
					t.Errorf("probe at file offset %#x outside .text [%#x, %#x)", off, lo, hi)
				}
			}
			b, _ := OpenGoBinary(p)
			defer b.Close()
			tf := b.table.LookupFunc(name)
			eoff := tf.Entry - text.Addr + text.Offset
			if fn.EntryOffset < eoff || fn.EntryOffset >= eoff+(tf.End-tf.Entry) {
				t.Errorf("entry probe %#x outside %s [%#x, %#x)", fn.EntryOffset, name, eoff, eoff+tf.End-tf.Entry)
			}
			for _, off := range fn.RetOffsets {
				if off < eoff || off >= eoff+(tf.End-tf.Entry) {
					t.Errorf("RET probe %#x outside %s", off, name)
				}
			}
		})
	}
}

// callFlood makes the 8 MiB of .text after the target's end (or what
// .text has) CALLs to the target, in functions of size bytes each.
func callFlood(t *testing.T, c *crafted, target *tableFunc, size uint64) {
	j := c.funcIndex(t, target.Entry) + 1
	for ; j < c.nfunc && uint64(c.u32(c.entryAt(j)))+c.textStart < target.End+4096; j++ {
	}
	start := uint64(c.u32(c.entryAt(j))) + c.textStart
	size -= size % 5 // whole CALLs in each function
	end := min(start+8<<20, c.text.Addr+c.text.Size-4096)
	end -= (end - start) % 5
	for a := start; j < c.nfunc && uint64(c.u32(c.entryAt(j)))+c.textStart < end; j++ {
		c.put32(c.entryAt(j), uint32(a-c.textStart))
		a = min(a+size, end)
	}
	c.put32(c.entryAt(j), uint32(end-c.textStart))
	// No data section holds the target's address (they are renamed
	// "gopclntab"), or ReturnSites would not look for its calls.
	for _, off := range c.dataShdrs {
		c.put32(off, c.u32(c.pclnShdr)+1)
	}
	for a := start; a+5 <= end; a += 5 {
		o := c.textOff(a)
		c.data[o] = 0xe8
		c.put32(o+1, uint32(int32(int64(target.Entry)-int64(a+5))))
	}
}

// readCrafted reads a binary as the commit tracer does.
func readCrafted(path, name string) (GoFunc, []uint64, error) {
	b, err := OpenGoBinary(path)
	if err != nil {
		return GoFunc{}, nil, err
	}
	defer b.Close()
	fn, err := b.Func(name, b.Arch() == elf.EM_X86_64)
	if err != nil || b.Arch() != elf.EM_X86_64 {
		return fn, nil, err
	}
	sites, _, err := b.ReturnSites(fn)
	return fn, sites, err
}

// FuzzOpenGoBinary reads any bytes as a Go executable, as commit and
// serve --commit-pid read the traced process's: no panic, and a lookup
// that succeeds names a function inside .text.
func FuzzOpenGoBinary(f *testing.F) {
	exe, err := os.Executable()
	if err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(exe)
	if err != nil {
		f.Fatal(err)
	}
	// The seed is the binary's first 4 KiB (its ELF and program
	// headers): the whole binary is too large for the mutator.
	f.Add(seed[:min(len(seed), 4<<10)])
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "etcd")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		fn, sites, err := readCrafted(p, "main.main")
		if err != nil {
			return
		}
		_, _ = fn, sites
	})
}
