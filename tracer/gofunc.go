package tracer

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

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
	f         *elf.File
	table     *funcTable
	text      *elf.Section
	textBytes []byte // .text, read by ReturnSites
	goVersion string // "go1.19.8"; "" when the build info is unreadable
}

// OpenGoBinary opens the ELF file at path and reads its pclntab
// (funcTable: in place, bounded; a table it does not take is
// ErrNoGoSymbols). Close it when done.
func OpenGoBinary(path string) (*GoBinary, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	b := &GoBinary{f: f, text: f.Section(".text")}
	if bi, err := buildinfo.ReadFile(path); err == nil {
		b.goVersion = bi.GoVersion
	}
	pcln := f.Section(".gopclntab")
	if pcln == nil || b.text == nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, ErrNoGoSymbols)
	}
	for _, s := range []*elf.Section{pcln, b.text} {
		if s.Type == elf.SHT_NOBITS || s.Size == 0 || s.Size > MaxGoSectionBytes {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, errGoTable("its %s section is %d bytes (%v; at most %d taken)", s.Name, s.Size, s.Type, MaxGoSectionBytes))
		}
	}
	data, err := pcln.Data()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("reading %s .gopclntab: %w", path, errGoTable("%v", err))
	}
	if b.table, err = newFuncTable(data, textStart(f, data, b.text)); err != nil {
		f.Close()
		if abiErr := registerABI(b.goVersion); abiErr != nil {
			return nil, abiErr // a release before Go 1.16's table: say why it is not probed
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// textStart returns the address the pclntab's function entries are
// relative to (Go 1.18+: runtime.text). .text's start is right only
// when Go's code begins the section: in a cgo build (Debian's etcd
// 3.4.23: CGO_ENABLED=1, Go 1.19.8, stripped) the C runtime's code comes
// first, and runtime.text lies 0x100 bytes into .text. The pclntab's header holds runtime.text
// (pcHeader.textStart, after magic, 4 bytes of pads and sizes, and nfunc
// and nfiles) in a non-PIE executable; where it reads 0 or lies outside
// .text (a PIE whose loader relocates it, an older table) .text's start
// is kept.
func textStart(f *elf.File, pcln []byte, text *elf.Section) uint64 {
	const hdr = 8 + 3*8 // magic, pads, minLC, ptrSize; nfunc, nfiles, textStart
	if len(pcln) < hdr || f.Class != elf.ELFCLASS64 || pcln[7] != 8 {
		return text.Addr
	}
	order := f.ByteOrder
	switch order.Uint32(pcln) {
	case 0xfffffff0, 0xfffffff1: // Go 1.18-1.19, 1.20+
	default:
		return text.Addr
	}
	if start := order.Uint64(pcln[8+2*8:]); start > text.Addr && start < text.Addr+text.Size {
		return start
	}
	return text.Addr
}

// Close closes the file.
func (b *GoBinary) Close() error { return b.f.Close() }

// GoVersion returns the Go release that built the binary ("go1.19.8"),
// from its build info; "" when that cannot be read.
func (b *GoBinary) GoVersion() string { return b.goVersion }

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
	if err := checkFunc(fn, b.text); err != nil {
		return GoFunc{}, err
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
// the loadable segment that maps it, which must map it where .text's
// section header says (a forged header cannot move a probe into another
// part of the file).
func (b *GoBinary) fileOffset(addr uint64) (uint64, error) {
	if addr < b.text.Addr || addr >= b.text.Addr+b.text.Size {
		return 0, fmt.Errorf("address %#x: %w", addr, ErrGoFuncOutsideText)
	}
	for _, p := range b.f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && p.Vaddr <= addr && addr < p.Vaddr+p.Filesz {
			off := addr - p.Vaddr + p.Off
			if off != addr-b.text.Addr+b.text.Offset {
				return 0, fmt.Errorf("address %#x: file offset %#x by its segment, %#x by .text: %w", addr, off, addr-b.text.Addr+b.text.Offset, ErrGoFuncOutsideText)
			}
			return off, nil
		}
	}
	return 0, fmt.Errorf("address %#x in no executable segment: %w", addr, ErrGoFuncOutsideText)
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

// ReturnSites returns where the direct calls of fn (found by Func with
// rets) return, as probe points the kernel emulates instead of
// single-stepping: for each CALL of fn, the first instruction after it
// that x86's uprobes emulate (a Jcc, JMP or CALL with a relative target, a
// PUSH of a register), when only plain instructions lie between (no
// return, no indirect branch, no branch target: nothing else reaches
// them). A probe at a RET is single-stepped out of line, a second trap:
// on the 6.18 VM that measured 24-37 µs a hit against 1.3-4 µs for an
// emulated one (docs/commit.md). ok is false (use fn.RetOffsets) when any
// call site has no such point, when no direct call exists, or when fn's
// address is stored in the binary's data (an interface's method table or
// a func value: calls that no CALL instruction shows).
func (b *GoBinary) ReturnSites(fn GoFunc) (offs []uint64, ok bool, err error) {
	if b.f.Machine != elf.EM_X86_64 {
		return nil, false, nil
	}
	f := b.table.LookupFunc(fn.Name)
	if f == nil {
		return nil, false, fmt.Errorf("%s: %w", fn.Name, ErrGoFuncNotFound)
	}
	text, err := b.textData()
	if err != nil {
		return nil, false, err
	}
	budget := maxCallSites
	sites, ok, err := b.returnSites(text, f.Entry, 0, &budget)
	if !ok || err != nil {
		return nil, false, err
	}
	for _, a := range sites {
		off, err := b.fileOffset(a)
		if err != nil {
			return nil, false, err
		}
		offs = append(offs, off)
	}
	return offs, true, nil
}

// maxTailDepth bounds how far ReturnSites follows calls in tail position
// (the caller returns right after the call: its own callers' return
// sites are the call's).
const maxTailDepth = 3

// maxCallSites bounds the call sites ReturnSites examines, tail callers'
// included, each a disassembly of its function and each tail caller a
// scan of .text: etcd's probed functions take 1-3 (v3.4, v3.5, v3.6),
// and a crafted .text of nothing but calls to one function had its
// function disassembled once per call (8 MiB of calls in functions of 64
// KiB: 62 s; of 256 KiB: over 120 s). Past it ReturnSites says not ok
// (the RETs are probed).
const maxCallSites = 16

// returnSites returns the addresses of the return sites of the function
// at entry (ReturnSites), following calls in tail position up to
// maxTailDepth callers; *budget counts down the call sites examined.
func (b *GoBinary) returnSites(text []byte, entry uint64, depth int, budget *int) (sites []uint64, ok bool, err error) {
	if depth > maxTailDepth || b.addressStored(entry) {
		return nil, false, nil
	}
	base := b.text.Addr
	for i := 0; i+5 <= len(text); i++ {
		if text[i] != 0xe8 {
			continue
		}
		at := base + uint64(i)
		if int64(at)+5+int64(int32(binary.LittleEndian.Uint32(text[i+1:]))) != int64(entry) {
			continue
		}
		if *budget--; *budget < 0 {
			return nil, false, nil
		}
		site, tail, isCall, err := b.returnSite(text, at)
		if err != nil {
			return nil, false, err
		}
		switch {
		case !isCall: // the bytes were inside another instruction
			continue
		case tail:
			caller := b.table.PCToFunc(at)
			more, ok, err := b.returnSites(text, caller.Entry, depth+1, budget)
			if !ok || err != nil {
				return nil, false, err
			}
			sites = append(sites, more...)
		case site == 0:
			return nil, false, nil
		default:
			sites = append(sites, site)
		}
	}
	return sites, len(sites) > 0, nil
}

// textData reads .text once.
func (b *GoBinary) textData() ([]byte, error) {
	if b.textBytes == nil {
		d, err := b.text.Data()
		if err != nil {
			return nil, fmt.Errorf("reading .text: %w", err)
		}
		b.textBytes = d
	}
	return b.textBytes, nil
}

// addressStored reports whether addr appears as a little-endian word in
// the binary's data sections (where itabs and func values live). The
// sections are read in 1 MiB pieces: their sizes are the binary's to
// say.
func (b *GoBinary) addressStored(addr uint64) bool {
	var word [8]byte
	binary.LittleEndian.PutUint64(word[:], addr)
	buf := make([]byte, 1<<20)
	for _, name := range []string{".rodata", ".data.rel.ro", ".noptrdata", ".data"} {
		s := b.f.Section(name)
		if s == nil || s.Type == elf.SHT_NOBITS {
			continue
		}
		r, keep := s.Open(), 0
		for {
			n, err := io.ReadFull(r, buf[keep:])
			if bytes.Contains(buf[:keep+n], word[:]) {
				return true
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				break
			}
			if err != nil {
				return true // unknown: assume it is
			}
			keep = copy(buf, buf[keep+n-len(word)+1:keep+n])
		}
	}
	return false
}

// returnSite decodes the function holding the CALL at address call:
// isCall is false when no instruction starts there; site is the first
// emulated instruction after the call, tail is true when a RET comes
// first (the caller returns with the call), both with only plain
// instructions between that no branch targets; else site is 0.
func (b *GoBinary) returnSite(text []byte, call uint64) (site uint64, tail, isCall bool, err error) {
	fn := b.table.PCToFunc(call)
	if fn == nil {
		return 0, false, false, nil
	}
	if checkFunc(fn, b.text) != nil || fn.End-b.text.Addr > uint64(len(text)) {
		return 0, false, true, nil // a call whose function the table places wrongly: no site
	}
	code := text[fn.Entry-b.text.Addr : fn.End-b.text.Addr]
	targets := map[uint64]bool{}
	var after []uint64 // instruction addresses from the return address on
	done := false
	for pc := 0; pc < len(code); {
		inst, err := x86asm.Decode(code[pc:], 64)
		if err != nil {
			return 0, false, true, nil // not Go's code: no site
		}
		addr := fn.Entry + uint64(pc)
		if rel, ok := inst.Args[0].(x86asm.Rel); ok {
			targets[uint64(int64(addr)+int64(inst.Len)+int64(rel))] = true
		}
		switch {
		case addr == call:
			if inst.Op != x86asm.CALL {
				return 0, false, false, nil
			}
			isCall = true
			after = []uint64{}
		case after != nil && !done:
			after = append(after, addr)
			switch {
			case emulated(inst):
				site, done = addr, true
			case inst.Op == x86asm.RET:
				tail, done = true, true
			case inst.Op == x86asm.JMP || inst.Op == x86asm.CALL || len(after) > 16:
				done = true // an indirect branch first
			}
		}
		pc += inst.Len
	}
	for _, a := range after {
		if targets[a] {
			return 0, false, isCall, nil
		}
	}
	return site, tail, isCall, nil
}

// emulated reports whether x86's uprobes run inst without single-stepping
// it (arch/x86/kernel/uprobes.c: branch_setup_xol_ops, push_setup_xol_ops):
// a relative CALL, JMP or Jcc, or a PUSH of a register.
func emulated(inst x86asm.Inst) bool {
	switch inst.Op {
	case x86asm.CALL, x86asm.JMP, x86asm.JA, x86asm.JAE, x86asm.JB, x86asm.JBE, x86asm.JE, x86asm.JG, x86asm.JGE,
		x86asm.JL, x86asm.JLE, x86asm.JNE, x86asm.JNO, x86asm.JNP, x86asm.JNS, x86asm.JO, x86asm.JP, x86asm.JS:
		_, rel := inst.Args[0].(x86asm.Rel)
		return rel
	case x86asm.PUSH:
		_, reg := inst.Args[0].(x86asm.Reg)
		return reg
	}
	return false
}
