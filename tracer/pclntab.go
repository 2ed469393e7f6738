package tracer

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// The bounds of a Go function table this reader takes. The binary is the
// traced process's executable, which any local user can craft and run as
// "etcd": each bound is far past a real etcd (v3.6 on go1.26: 35,074
// functions, the longest 32,960 bytes; .gopclntab 10 MB, .text 12 MB)
// and keeps a crafted one from costing root's etcdscope more than its
// size (debug/gosym allocated 150 bytes a function of the header's count:
// a forged count of 2^32 was a fatal out-of-memory, no recover).
const (
	// MaxGoFuncs bounds the functions a table may list.
	MaxGoFuncs = 1 << 20
	// MaxGoFuncBytes bounds one function's code (read and disassembled
	// for its RET instructions and call sites; 256 KiB takes 11 ms).
	MaxGoFuncBytes = 256 << 10
	// MaxGoSectionBytes bounds the .gopclntab and .text sections, each
	// read whole.
	MaxGoSectionBytes = 256 << 20
)

// errGoTable is a Go function table this reader does not take (forged,
// truncated, or of a layout before Go 1.16): as ErrNoGoSymbols, commit
// falls back to the model or refuses the pid.
func errGoTable(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrNoGoSymbols}, args...)...)
}

// funcTable reads a Go 1.16+ pclntab (runtime/symtab.go's pcHeader,
// functab and _func) in place: a lookup compares names where they lie
// and allocates nothing per function. Its entries were checked in order
// when it was made, so a pc finds its function by binary search.
type funcTable struct {
	data      []byte
	order     binary.ByteOrder
	go116     bool   // entries are absolute pcs of pointer size (Go 1.16-1.17)
	textStart uint64 // what Go 1.18+ entries are relative to
	nfunc     int
	names     []byte // funcnametab
	funcdata  []byte // from pclnOffset: the functab, then the _func records
}

// tableFunc is one function of the table: [Entry, End) in the binary's
// addresses.
type tableFunc struct {
	Name       string
	Entry, End uint64
}

// newFuncTable checks the header and the function table and returns the
// reader; every error wraps ErrNoGoSymbols.
func newFuncTable(data []byte, textStart uint64) (*funcTable, error) {
	if len(data) < 8+8*8 {
		return nil, errGoTable("a .gopclntab of %d bytes", len(data))
	}
	t := &funcTable{data: data, textStart: textStart}
	var magic uint32
	for _, o := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		switch o.Uint32(data) {
		case 0xfffffff0, 0xfffffff1: // Go 1.18-1.19, 1.20+
			t.order, magic = o, o.Uint32(data)
		case 0xfffffffa: // Go 1.16-1.17
			t.order, magic, t.go116 = o, o.Uint32(data), true
		}
	}
	if t.order == nil {
		return nil, errGoTable("pclntab magic %#x: a Go symbol table before Go 1.16 (or none) is not read", binary.LittleEndian.Uint32(data))
	}
	if data[4] != 0 || data[5] != 0 || data[7] != 8 {
		return nil, errGoTable("pclntab %#x header %x: not a 64-bit Go table", magic, data[4:8])
	}
	word := func(k int) uint64 { return t.order.Uint64(data[8+8*k:]) }
	n := word(0)
	funcnameOff, pclnOff := word(3), word(7)
	if t.go116 {
		funcnameOff, pclnOff = word(2), word(6)
	}
	if n == 0 || n > MaxGoFuncs {
		return nil, errGoTable("pclntab lists %d functions (at most %d taken)", n, MaxGoFuncs)
	}
	if funcnameOff >= uint64(len(data)) || pclnOff >= uint64(len(data)) {
		return nil, errGoTable("pclntab offsets %#x, %#x outside its %d bytes", funcnameOff, pclnOff, len(data))
	}
	t.nfunc, t.names, t.funcdata = int(n), data[funcnameOff:], data[pclnOff:]
	if uint64(len(t.funcdata)) < (n+1)*uint64(t.fieldSize())*2 {
		return nil, errGoTable("pclntab's function table of %d entries runs past its %d bytes", n, len(data))
	}
	for i := 1; i <= t.nfunc; i++ {
		if t.entry(i) < t.entry(i-1) {
			return nil, errGoTable("pclntab's function %d starts at %#x, before function %d's %#x", i, t.entry(i), i-1, t.entry(i-1))
		}
	}
	return t, nil
}

// fieldSize is a functab field's size: 4 since Go 1.18, a pointer before.
func (t *funcTable) fieldSize() int {
	if t.go116 {
		return 8
	}
	return 4
}

// field reads functab field k (entry i's is 2i, its _func offset 2i+1).
func (t *funcTable) field(k int) uint64 {
	if t.go116 {
		return t.order.Uint64(t.funcdata[8*k:])
	}
	return uint64(t.order.Uint32(t.funcdata[4*k:]))
}

// entry returns function i's entry address (i == nfunc: the end of the
// last one).
func (t *funcTable) entry(i int) uint64 {
	if t.go116 {
		return t.field(2 * i)
	}
	return t.textStart + t.field(2*i)
}

// name returns function i's name bytes (nil when its record or name lies
// outside the table).
func (t *funcTable) name(i int) []byte {
	off := t.field(2*i + 1)
	nameAt := off + 4 // _func: entryOff uint32, nameOff int32
	if t.go116 {
		nameAt = off + 8 // entry uintptr, nameoff int32
	}
	if nameAt+4 > uint64(len(t.funcdata)) {
		return nil
	}
	noff := uint64(t.order.Uint32(t.funcdata[nameAt:]))
	if noff >= uint64(len(t.names)) {
		return nil
	}
	s := t.names[noff:]
	if end := bytes.IndexByte(s, 0); end >= 0 {
		return s[:end]
	}
	return nil
}

// fn returns function i, its name cut to 256 bytes (names reach error
// lines).
func (t *funcTable) fn(i int) *tableFunc {
	name := t.name(i)
	if len(name) > 256 {
		name = name[:256]
	}
	return &tableFunc{Name: string(name), Entry: t.entry(i), End: t.entry(i + 1)}
}

// LookupFunc returns the first function named name, or nil.
func (t *funcTable) LookupFunc(name string) *tableFunc {
	for i := 0; i < t.nfunc; i++ {
		if string(t.name(i)) == name { // compared in place: no allocation
			return t.fn(i)
		}
	}
	return nil
}

// PCToFunc returns the function whose [Entry, End) holds pc, or nil.
func (t *funcTable) PCToFunc(pc uint64) *tableFunc {
	i := sort.Search(t.nfunc, func(i int) bool { return t.entry(i+1) > pc })
	if i == t.nfunc || t.entry(i) > pc {
		return nil
	}
	return t.fn(i)
}

// ErrGoFuncOutsideText: a function the table names does not lie within
// .text, or is longer than any Go function (MaxGoFuncBytes). A probe is
// placed only at an entry or instruction inside the function the table
// names, and that function inside .text.
var ErrGoFuncOutsideText = errors.New("function outside the binary's .text")

// checkFunc refuses a function that is empty, longer than
// MaxGoFuncBytes, or not inside text.
func checkFunc(fn *tableFunc, text *elf.Section) error {
	switch {
	case fn.End <= fn.Entry:
		return fmt.Errorf("%s: [%#x, %#x): %w (empty)", fn.Name, fn.Entry, fn.End, ErrGoFuncOutsideText)
	case fn.End-fn.Entry > MaxGoFuncBytes:
		return fmt.Errorf("%s: %d bytes, more than %d: %w", fn.Name, fn.End-fn.Entry, MaxGoFuncBytes, ErrGoFuncOutsideText)
	case fn.Entry < text.Addr || fn.End > text.Addr+text.Size || fn.End < text.Addr:
		return fmt.Errorf("%s: [%#x, %#x) not in .text [%#x, %#x): %w", fn.Name, fn.Entry, fn.End, text.Addr, text.Addr+text.Size, ErrGoFuncOutsideText)
	}
	return nil
}
