package analysis

import (
	"testing"

	"github.com/etcdscope/etcdscope/event"
)

// TestAttributorOverflow: enters that never exit and partial completions
// of requests that never complete are held up to MaxInflight and
// MaxPartial; past them each is counted, not held, and what is held
// still works: a held enter's call and a held request's bytes.
func TestAttributorOverflow(t *testing.T) {
	a := NewAttributor(func(event.Dev) (string, []event.Dev) { return "sda", nil })
	const extra = 10
	for i := range MaxInflight + extra {
		a.AddEvent(&event.Any{Kind: event.KindFsyncEnter, Enter: event.FsyncEnter{TID: uint32(i + 1), StartNs: 1e9 + uint64(i)}})
	}
	for i := range MaxPartial + extra {
		a.AddEvent(&event.Any{Kind: event.KindBlock, Block: event.Block{Rq: uint64(i + 1), Dev: 1, Bytes: 4096, CompleteNs: 1e9 + uint64(i)}})
	}
	a.AddEvent(&event.Any{Kind: event.KindFsyncEnter, Enter: event.FsyncEnter{TID: 1, StartNs: 2e9}}) // held: not counted again
	enters, partials := a.Overflow()
	if enters != extra || partials != extra {
		t.Errorf("Overflow %d enters, %d partials; want %d each", enters, partials, extra)
	}
	if len(a.inflight) != MaxInflight || len(a.partial) != MaxPartial {
		t.Errorf("held %d in flight, %d partial; want %d, %d", len(a.inflight), len(a.partial), MaxInflight, MaxPartial)
	}
	if a.inflight[1] != 2e9 {
		t.Errorf("a held enter was not updated: %d", a.inflight[1])
	}
}
