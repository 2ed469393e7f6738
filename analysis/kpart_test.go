package analysis

import (
	"reflect"
	"testing"

	"github.com/etcdscope/etcdscope/event"
)

func TestPartitionKPart(t *testing.T) {
	req := func(ins, iss, cpl uint64, cat event.KPCat, preflush bool) event.KPEntry {
		return event.KPEntry{A: ins, B: iss, C: cpl, Type: event.KPEntryRequest, Cat: cat, Preflush: preflush}
	}
	bio := func(q uint64) event.KPEntry { return event.KPEntry{A: q, Type: event.KPEntryFlushBio} }
	for _, c := range []struct {
		name string
		in   event.KPart
		want event.KPart // layers and counts
	}{
		{"flush issued from kblockd, data write, jbd2 commit", event.KPart{StartNs: 100, EndNs: 200, Slot: []event.KPEntry{
			bio(110), req(0, 130, 170, event.KPCatFlush, true), req(105, 108, 125, event.KPCatData, false),
			{A: 102, B: 190, Type: event.KPEntryJournalCommit},
		}}, event.KPart{DeviceFlushNs: 40, BlockQueueNs: 23, DataWritebackNs: 2, JournalNs: 23, OtherNs: 12, Flushes: 1, Requests: 2, JournalWindows: 1}},
		{"flush never issued: from its bio, not one before the call", event.KPart{StartNs: 100, EndNs: 200, Slot: []event.KPEntry{
			bio(90), bio(120), req(0, 0, 150, event.KPCatFlush, true),
		}}, event.KPart{DeviceFlushNs: 30, OtherNs: 70, Flushes: 1, Requests: 1}},
		{"FUA write, a completion after the call", event.KPart{StartNs: 100, EndNs: 200, Slot: []event.KPEntry{
			req(110, 120, 160, event.KPCatFlush, false), req(150, 160, 210, event.KPCatJournal, false),
		}}, event.KPart{DeviceFlushNs: 40, BlockQueueNs: 10, OtherNs: 50, FUAWrites: 1, Requests: 1}},
		{"overflow: left as it is", event.KPart{StartNs: 100, EndNs: 200, Reason: event.KPartOverflow, Slot: []event.KPEntry{
			req(110, 120, 160, event.KPCatData, false),
		}}, event.KPart{Reason: event.KPartOverflow}},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := c.in
			NewAttributor(nil).PartitionKPart(&k)
			k.StartNs, k.EndNs, k.Slot = 0, 0, nil
			if !reflect.DeepEqual(k, c.want) {
				t.Errorf("got %+v, want %+v", k, c.want)
			}
		})
	}
}
