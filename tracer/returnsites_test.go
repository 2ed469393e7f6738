package tracer

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/arch/x86/x86asm"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestReturnSites finds the return sites of the commit tracer's return
// probes in the etcd v3.6 binary (make etcd) and checks each one: it
// is an instruction the kernel emulates, and processInternalRaftRequestOnce
// (its callers test the error right after the call) has them.
func TestReturnSites(t *testing.T) {
	bin := filepath.Join("..", "bin", "etcd")
	if _, err := os.Stat(bin); err != nil {
		testenv.Missing(t, "no "+bin+" (make etcd)")
	}
	b, err := OpenGoBinary(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	text, err := b.textData()
	if err != nil {
		t.Fatal(err)
	}
	base, err := b.fileOffset(b.text.Addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range commitProbes {
		if !p.ret {
			continue
		}
		fn, err := findFunc(b, p.names, true)
		if err != nil {
			t.Fatal(err)
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
