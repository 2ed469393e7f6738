package tracer

import (
	"debug/elf"
	"debug/gosym"
	"errors"
	"fmt"

	"golang.org/x/arch/x86/x86asm"
)

// GoFunc is one function of a Go binary, found through its pclntab, with
// the file offsets a uprobe attaches at (cilium/ebpf's
// UprobeOptions.Address).
type GoFunc struct {
	Name string
	// EntryOffset is the file offset where an entry probe goes: past the
	// stack-bound check of the prologue (CMP SP, 16(R14); JBE morestack)
	// when there is one, since a goroutine whose stack must grow runs
	// that check twice (morestack restarts the function), and the
	// arguments are still in their registers there. Without rets (or not
	// on amd64) it is the first instruction.
	EntryOffset uint64
	// RetOffsets are the file offsets of its RET instructions: where a
	// probe sees the function return (Go code cannot take uretprobes:
	// the kernel's return trampoline breaks when the goroutine's stack
	// moves). Empty unless asked for.
	RetOffsets []uint64
}

// ErrNoGoSymbols is returned when a binary has no .gopclntab section (not
// a Go binary, or one whose tables were removed).
var ErrNoGoSymbols = errors.New("no Go symbol table (.gopclntab)")

// GoBinary reads a Go executable's function table. The .gopclntab
// section survives stripping (-s -w), so release builds of etcd are
// readable.
type GoBinary struct {
	f     *elf.File
	table *gosym.Table
	text  *elf.Section
}

// OpenGoBinary opens the ELF file at path and reads its pclntab. Close it
// when done.
func OpenGoBinary(path string) (*GoBinary, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	b := &GoBinary{f: f, text: f.Section(".text")}
	pcln := f.Section(".gopclntab")
	if pcln == nil || b.text == nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, ErrNoGoSymbols)
	}
	data, err := pcln.Data()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("reading %s .gopclntab: %w", path, err)
	}
	if b.table, err = gosym.NewTable(nil, gosym.NewLineTable(data, b.text.Addr)); err != nil {
		f.Close()
		return nil, fmt.Errorf("parsing %s .gopclntab: %w", path, err)
	}
	return b, nil
}

// Close closes the file.
func (b *GoBinary) Close() error { return b.f.Close() }

// Arch returns the binary's machine (elf.EM_X86_64, elf.EM_AARCH64, ...).
func (b *GoBinary) Arch() elf.Machine { return b.f.Machine }

// Func looks up a function by its full Go name (e.g.
// "go.etcd.io/etcd/server/v3/storage/wal.(*WAL).sync"); with rets it also
// finds its RET instructions (amd64 only). It returns an error wrapping
// ErrGoFuncNotFound when the binary has no such
// function (renamed, inlined away or another version).
func (b *GoBinary) Func(name string, rets bool) (GoFunc, error) {
	fn := b.table.LookupFunc(name)
	if fn == nil {
		return GoFunc{}, fmt.Errorf("%s: %w", name, ErrGoFuncNotFound)
	}
	off, err := b.fileOffset(fn.Entry)
	if err != nil {
		return GoFunc{}, fmt.Errorf("%s: %w", name, err)
	}
	g := GoFunc{Name: name, EntryOffset: off}
	if !rets {
		return g, nil
	}
	if b.f.Machine != elf.EM_X86_64 {
		return GoFunc{}, fmt.Errorf("%s: finding RET instructions on %v: %w", name, b.f.Machine, errors.ErrUnsupported)
	}
	code := make([]byte, fn.End-fn.Entry)
	if _, err := b.text.ReadAt(code, int64(fn.Entry-b.text.Addr)); err != nil {
		return GoFunc{}, fmt.Errorf("reading %s: %w", name, err)
	}
	// A linear sweep is exact for Go code: the compiler puts no data in
	// .text between a function's instructions (the padding after the
	// last one is INT3).
	sawStackCheck := false
	for pc, n := 0, 0; pc < len(code); n++ {
		inst, err := x86asm.Decode(code[pc:], 64)
		if err != nil {
			return GoFunc{}, fmt.Errorf("disassembling %s at +%#x: %w", name, pc, err)
		}
		// The prologue: [LEAQ -N(SP), R12;] CMPQ SP|R12, 0x10(R14); JBE.
		if n < 3 && inst.Op == x86asm.CMP && usesG(inst) {
			sawStackCheck = true
		}
		if n < 4 && sawStackCheck && inst.Op == x86asm.JBE {
			g.EntryOffset = off + uint64(pc+inst.Len)
			sawStackCheck = false
		}
		if inst.Op == x86asm.RET {
			g.RetOffsets = append(g.RetOffsets, off+uint64(pc))
		}
		pc += inst.Len
	}
	if len(g.RetOffsets) == 0 {
		return GoFunc{}, fmt.Errorf("%s: no RET instruction found", name)
	}
	return g, nil
}

// ErrGoFuncNotFound: the binary has no function of that name.
var ErrGoFuncNotFound = errors.New("function not in the binary's Go symbol table")

// fileOffset converts a virtual address in .text to a file offset through
// the loadable segment that maps it.
func (b *GoBinary) fileOffset(addr uint64) (uint64, error) {
	for _, p := range b.f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && p.Vaddr <= addr && addr < p.Vaddr+p.Filesz {
			return addr - p.Vaddr + p.Off, nil
		}
	}
	return 0, fmt.Errorf("address %#x in no executable segment", addr)
}

// usesG reports whether an instruction reads memory at R14 (the g).
func usesG(inst x86asm.Inst) bool {
	for _, a := range inst.Args {
		if m, ok := a.(x86asm.Mem); ok && m.Base == x86asm.R14 {
			return true
		}
	}
	return false
}
