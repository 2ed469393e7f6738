package tracer

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/arch/x86/x86asm"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestReturnSites finds every probed function of the commit tracer in
// the etcd v3.6 binary (make etcd) and in Debian's v3.4 (bin/etcd34:
// cgo, stripped, its Go code 0x100 bytes into .text) and checks where the
// probes go: each function's entry offset lies past its stack-bound
// check (found only where the table's address is the function's real
// first instruction), and each return site is an instruction the kernel
// emulates; processInternalRaftRequestOnce (its callers test the error
// right after the call) has them.
func TestReturnSites(t *testing.T) {
	for _, c := range []struct{ bin, build string }{{"etcd", "v3.5/v3.6"}, {"etcd35", "v3.5/v3.6"}, {"etcd34", "v3.4"}} {
		t.Run(c.bin, func(t *testing.T) { checkReturnSites(t, filepath.Join("..", "bin", c.bin), c.build) })
	}
}

func checkReturnSites(t *testing.T, bin, build string) {
	if _, err := os.Stat(bin); err != nil {
		testenv.Missing(t, "no "+bin+" (make etcd; scripts/deps.sh)")
	}
	b, err := OpenGoBinary(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got, ok := pickBuild(b)
	if !ok || got.name != build {
		t.Fatalf("release line %q (found %v), want %q", got.name, ok, build)
	}
	text, err := b.textData()
	if err != nil {
		t.Fatal(err)
	}
	base, err := b.fileOffset(b.text.Addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range commitProbes {
		fn, err := findFunc(b, p.names(got), true)
		if err != nil {
			t.Fatal(err)
		}
		if f := b.table.LookupFunc(fn.Name); fn.EntryOffset == f.Entry-b.text.Addr+base {
			t.Errorf("%s: no stack-bound check at its entry %#x", fn.Name, f.Entry)
		}
		if !p.ret {
			continue
		}
		sites, ok, err := b.ReturnSites(fn)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d RETs, return sites %v (%d)", fn.Name, len(fn.RetOffsets), ok, len(sites))
		if p.kind == event.CommitProposeRet && !ok {
			t.Errorf("%s: no return sites", fn.Name)
		}
		for _, off := range sites {
			addr := off - base + b.text.Addr
			inst, err := x86asm.Decode(text[addr-b.text.Addr:], 64)
			if err != nil || !emulated(inst) {
				t.Errorf("%s: return site %#x is %v (%v): not emulated", fn.Name, addr, inst, err)
			}
		}
	}
}
