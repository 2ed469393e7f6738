package analysis

import (
	"reflect"
	"testing"

	"github.com/etcdscope/etcdscope/event"
)

func TestAttributeKPart(t *testing.T) {
	req := func(ins, iss, cpl uint64, cat event.KPCat, preflush bool) event.KPEntry {
		return event.KPEntry{A: ins, B: iss, C: cpl, Type: event.KPEntryRequest, Cat: cat, Preflush: preflush}
	}
	bio := func(q uint64) event.KPEntry { return event.KPEntry{A: q, Type: event.KPEntryFlushBio} }
	// got: layers, then flushes, FUA writes, requests and commits.
	type got struct {
		Layers
		Flushes, FUAWrites, Requests, Commits int
	}
	for _, c := range []struct {
		name string
		in   []event.KPEntry
		want got
	}{
		{"flush issued from kblockd, data write, jbd2 commit", []event.KPEntry{
			bio(110), req(0, 130, 170, event.KPCatFlush, true), req(105, 108, 125, event.KPCatData, false),
			{A: 102, B: 190, Type: event.KPEntryJournalCommit},
		}, got{Layers{DeviceFlushNs: 40, BlockQueueNs: 23, DataWritebackNs: 2, JournalNs: 23, OtherNs: 12}, 1, 0, 2, 1}},
		{"flush never issued: from its bio, not one before the call", []event.KPEntry{
			bio(90), bio(120), req(0, 0, 150, event.KPCatFlush, true),
		}, got{Layers{DeviceFlushNs: 30, OtherNs: 70}, 1, 0, 1, 0}},
		{"FUA write, a completion after the call", []event.KPEntry{
			req(110, 120, 160, event.KPCatFlush, false), req(150, 160, 210, event.KPCatJournal, false),
		}, got{Layers{DeviceFlushNs: 40, BlockQueueNs: 10, OtherNs: 50}, 0, 1, 1, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := event.KPart{StartNs: 100, EndNs: 200, Slot: c.in}
			r := NewAttributor(nil).AttributeKPart(event.Fsync{StartNs: 100, EndNs: 200}, &k)
			g := got{r.Layers, r.Flushes, r.FUAWrites, len(r.Requests), len(r.Journal)}
			if !reflect.DeepEqual(g, c.want) || r.TotalNs != 100 {
				t.Errorf("got %+v (total %d), want %+v", g, r.TotalNs, c.want)
			}
		})
	}
}
