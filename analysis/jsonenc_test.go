package analysis

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// The oracle is encoding/json itself: AppendJSON must write the bytes
// json.Marshal writes for the same record.
func checkAppendJSON(t *testing.T, name string, rec *FsyncRecord) {
	t.Helper()
	want, err := json.Marshal(rec)
	if err != nil {
		t.Fatalf("%s: json.Marshal: %v", name, err)
	}
	got := rec.AppendJSON([]byte("prefix kept:"))
	if !bytes.HasPrefix(got, []byte("prefix kept:")) {
		t.Fatalf("%s: AppendJSON dropped what dst held", name)
	}
	got = got[len("prefix kept:"):]
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Errorf("%s: AppendJSON differs from encoding/json at byte %d:\n got %s\nwant %s", name, i, got, want)
	}
}

// nastyStrings need every escape encoding/json makes (HTML escaping on).
var nastyStrings = []string{
	"", "etcd", `quo"te`, `back\slash`, "ctl\x00\x01\x1f\x7f", "\b\f\n\r\t", "<script>&amp;</script>",
	"héllo wörld ✓ 日本", "bad utf8 \xff\xfe end", "trunc \xe2\x82", "\u2028line\u2029para", "jbd2/vda1-8",
	"\xed\xa0\x80 surrogate", "emoji 😀",
}

// fillNonZero sets every field reachable from v to a non-zero value
// (slices get two elements, nested records one level), so a field added to
// a record type without AppendJSON learning it makes the test fail.
func fillNonZero(v reflect.Value, depth int, seq *int) {
	*seq++
	switch v.Kind() {
	case reflect.String:
		v.SetString(nastyStrings[*seq%len(nastyStrings)] + fmt.Sprint(*seq))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*seq) * -1000003)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*seq) * 1000003)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			fillNonZero(v.Field(i), depth, seq)
		}
	case reflect.Slice:
		if v.Type().Elem() == reflect.TypeOf(FsyncRecord{}) && depth > 1 {
			return // one level of host records
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := 0; i < 2; i++ {
			fillNonZero(s.Index(i), depth+1, seq)
		}
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillNonZero(p.Elem(), depth, seq)
		v.Set(p)
	default:
		panic("fillNonZero: unhandled kind " + v.Kind().String())
	}
}

func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	// A record as Attribute makes it, from the benchmark's ext4 stream.
	real := benchRecord()
	if len(real.Requests) == 0 || len(real.Journal) == 0 {
		t.Fatalf("benchmark stream attributed no requests or journal: %+v", real)
	}
	checkAppendJSON(t, "attributed ext4 fdatasync", &real)

	var full FsyncRecord
	seq := 0
	fillNonZero(reflect.ValueOf(&full).Elem(), 0, &seq)
	if len(full.Requests[0].Host) == 0 {
		t.Fatal("fillNonZero left Host empty")
	}
	checkAppendJSON(t, "every field set, nested host records", &full)

	extremes := FsyncRecord{Type: "fsync", StartNs: math.MaxUint64, EndNs: 0, TotalNs: math.MinInt64, Ret: math.MaxInt64,
		PID: math.MaxUint32, FD: math.MinInt32, Ino: math.MaxUint64, Flushes: -1, Version: SchemaVersion,
		Requests: []Request{{Sector: math.MaxUint64, Bytes: math.MaxUint32, TID: math.MaxUint32}},
		Layers:   Layers{OtherNs: math.MinInt64, JournalNs: math.MaxInt64}}
	checkAppendJSON(t, "integer extremes", &extremes)

	// omitempty and nil-versus-empty: requests is written as null or [],
	// the omitempty slices are left out either way.
	checkAppendJSON(t, "zero record (requests null)", &FsyncRecord{})
	checkAppendJSON(t, "empty slices", &FsyncRecord{Requests: []Request{}, Disks: []string{}, Journal: []JournalWindow{}})
	checkAppendJSON(t, "request with empty flags and host", &FsyncRecord{Requests: []Request{{Flags: []string{}, Host: []FsyncRecord{}}}})
	checkAppendJSON(t, "request with nil flags, host with nil requests", &FsyncRecord{Requests: []Request{{Host: []FsyncRecord{{}}}}})

	for i, s := range nastyStrings {
		rec := real
		rec.Comm, rec.Path, rec.DevName = s, "/data/"+s, s+s
		rec.Disks = []string{s, ""}
		rec.Requests = append([]Request(nil), real.Requests...)
		rec.Requests[0].Comm, rec.Requests[0].Flags = s, []string{s}
		rec.Journal = append([]JournalWindow(nil), real.Journal...)
		rec.Journal[0].Source = s
		checkAppendJSON(t, fmt.Sprintf("strings %d %q", i, s), &rec)
	}
}

// Every single byte and a sweep of code points, alone and inside text.
func TestAppendJSONStringEveryByte(t *testing.T) {
	var ss []string
	for b := 0; b < 256; b++ {
		ss = append(ss, string([]byte{byte(b)}), "a"+string([]byte{byte(b)})+"z")
	}
	for r := rune(0x80); r < 0x3000; r += 7 {
		ss = append(ss, "x"+string(r))
	}
	ss = append(ss, string(rune(utf8.MaxRune)), "\U0010ffff", "\ufffd", "\xf4\x90\x80\x80")
	for _, s := range ss {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("appendJSONString(%q) = %s, encoding/json %s", s, got, want)
		}
	}
}

// FuzzAppendJSONString: go test -fuzz AppendJSONString ./analysis/ for
// more than the seeds.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range nastyStrings {
		f.Add(s)
	}
	f.Add(strings.Repeat("\x00<\u2029\xc3", 10))
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("appendJSONString(%q) = %s, encoding/json %s", s, got, want)
		}
	})
}

// What AppendJSON writes reads back through ReadJSONL as the same record.
func TestAppendJSONReadsBack(t *testing.T) {
	a := NewAttributor(lookup)
	var buf []byte
	var want []FsyncRecord
	for i := 0; i < 3; i++ {
		s := uint64(1e9 + i*1e6)
		evs := benchEvents(s, uint64(2*i), nil)
		for j := range evs {
			a.AddEvent(&evs[j])
		}
		rec := a.Attribute(fsyncEv(s, s+120e3))
		rec.Path = "/d/" + nastyStrings[i+2]
		want = append(want, rec)
		buf = append(rec.AppendJSON(buf), '\n')
	}
	got, _, err := ReadJSONL(bytes.NewReader(buf))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ReadJSONL of AppendJSON's output:\n got %+v\nwant %+v", got, want)
	}
}

// FsyncEncoder writes what encoding/json writes for every record of a
// stream in which each field it caches changes in turn (and changes back),
// so a field compared wrongly, or left out of sameFile, shows as a
// line carrying the previous record's value.
func TestFsyncEncoderMatchesEncodingJSON(t *testing.T) {
	base := benchRecord()
	base.Path, base.FileKind = "/var/lib/etcd/member/wal/0.wal", "wal"
	base.Disks = []string{"253:0"}
	changes := []func(r *FsyncRecord){
		func(r *FsyncRecord) {},
		func(r *FsyncRecord) { r.PID++ },
		func(r *FsyncRecord) { r.TID++ },
		func(r *FsyncRecord) { r.Comm = "etcd2" },
		func(r *FsyncRecord) { r.Syscall = "fsync" },
		func(r *FsyncRecord) { r.Datasync = !r.Datasync },
		func(r *FsyncRecord) { r.Ret = -5 },
		func(r *FsyncRecord) { r.FD++ },
		func(r *FsyncRecord) { r.Dev = "8:1" },
		func(r *FsyncRecord) { r.DevName = "sda1" },
		func(r *FsyncRecord) { r.Disks = nil },
		func(r *FsyncRecord) { r.Disks = []string{} },
		func(r *FsyncRecord) { r.Disks = []string{"253:0", "8:0"} },
		func(r *FsyncRecord) { r.Disks = []string{"8:0"} },
		func(r *FsyncRecord) { r.FS = "xfs" },
		func(r *FsyncRecord) { r.Ino++ },
		func(r *FsyncRecord) { r.Path = "/d/" + nastyStrings[2] },
		func(r *FsyncRecord) { r.FileKind = "snap" },
		// Not cached: start, end, total, layers, requests change per call.
		func(r *FsyncRecord) { r.StartNs, r.EndNs, r.TotalNs = r.StartNs+7, r.EndNs+9, r.TotalNs+2 },
	}
	var e FsyncEncoder
	var disks [4]string // a caller reusing its Disks array must not change the cache
	for i, change := range changes {
		for _, back := range []bool{false, true} {
			rec := base
			rec.Disks = slices.Clone(base.Disks)
			if !back {
				change(&rec)
			}
			if rec.Disks != nil {
				n := copy(disks[:], rec.Disks)
				rec.Disks = disks[:n:n]
			}
			for rep := 0; rep < 2; rep++ { // the second from the cache
				want, err := json.Marshal(&rec)
				if err != nil {
					t.Fatal(err)
				}
				got := e.Append([]byte("kept:"), &rec)
				if !bytes.Equal(got, append([]byte("kept:"), want...)) {
					t.Fatalf("change %d (back %v, rep %d):\n got %s\nwant kept:%s", i, back, rep, got, want)
				}
			}
			copy(disks[:], []string{"x", "y", "z", "w"}) // reused by the caller
		}
	}
}

// TestFsyncEncoderSlots: records of three files in turn, in patterns that
// hit each of the two cached encodings and replace the one used least
// recently, each line what encoding/json writes.
func TestFsyncEncoderSlots(t *testing.T) {
	recs := make([]FsyncRecord, 3)
	for i := range recs {
		recs[i] = benchRecord()
		recs[i].Path, recs[i].Ino, recs[i].FD = fmt.Sprintf("/var/lib/etcd/member/wal/%d.wal", i), uint64(100+i), int32(5+i)
	}
	var e FsyncEncoder
	for n, i := range []int{0, 0, 1, 0, 1, 2, 1, 2, 0, 2, 0, 1, 1, 0, 2, 2, 1} {
		rec := recs[i]
		rec.TID += uint32(n % 3) // a goroutine that moves between threads
		want, err := json.Marshal(&rec)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.Append(nil, &rec); !bytes.Equal(got, want) {
			t.Fatalf("record %d (file %d):\n got %s\nwant %s", n, i, got, want)
		}
	}
}

// TestAppendUintMatchesStrconv: appendUint and appendInt write strconv's
// bytes for every length of number (each power of ten and its
// neighbours), the extremes, and random values, onto a dst with room and
// one without.
func TestAppendUintMatchesStrconv(t *testing.T) {
	us := []uint64{0, 1, 9, 10, 11, 99, 100, 101, math.MaxUint64, math.MaxUint64 - 1, math.MaxInt64, math.MaxInt64 + 1}
	for p := uint64(10); p <= 1e19; p *= 10 {
		us = append(us, p-1, p, p+1)
		if p > math.MaxUint64/10 {
			break
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		us = append(us, rng.Uint64()>>rng.IntN(64))
	}
	for _, u := range us {
		for _, dst := range [][]byte{[]byte("k:"), append(make([]byte, 0, 64), "k:"...)} {
			if got, want := appendUint(slices.Clone(dst), u), strconv.AppendUint(slices.Clone(dst), u, 10); !bytes.Equal(got, want) {
				t.Fatalf("appendUint(%d) = %q, want %q", u, got, want)
			}
			for _, i := range []int64{int64(u), -int64(u)} {
				if got, want := appendInt(slices.Clone(dst), i), strconv.AppendInt(slices.Clone(dst), i, 10); !bytes.Equal(got, want) {
					t.Fatalf("appendInt(%d) = %q, want %q", i, got, want)
				}
			}
		}
	}
	if got := appendInt(nil, math.MinInt64); string(got) != strconv.FormatInt(math.MinInt64, 10) {
		t.Fatalf("appendInt(MinInt64) = %q", got)
	}
}

// TestFsyncEncoderHostCache: guest records nesting host records (shallow
// copies sharing their requests, as nest makes them) give encoding/json's
// bytes whether a host's encoding comes from the cache or not, and a
// host record that differs in any field, or has its own arrays, is
// encoded anew.
func TestFsyncEncoderHostCache(t *testing.T) {
	hosts := make([]FsyncRecord, hostSlots+3) // more than the cache holds
	for i := range hosts {
		h := benchRecord()
		h.Syscall, h.FD, h.Path, h.FileKind = "vfs_fsync", -1, "", ""
		h.StartNs += uint64(i) * 1000
		h.Requests = slices.Clone(h.Requests)
		hosts[i] = h
	}
	changes := []func(h *FsyncRecord){
		func(h *FsyncRecord) {},
		func(h *FsyncRecord) { h.Path = "/var/tmp/disk.img" },
		func(h *FsyncRecord) { h.Path = "/var/tmp/other.img" },
		func(h *FsyncRecord) { h.TotalNs++ },
		func(h *FsyncRecord) { h.Layers.OtherNs++ },
		func(h *FsyncRecord) { h.Flushes++ },
		func(h *FsyncRecord) { h.Requests = h.Requests[:len(h.Requests)-1] },
		func(h *FsyncRecord) { h.Requests = slices.Clone(h.Requests); h.Requests[0].Bytes++ },
		func(h *FsyncRecord) {
			h.Journal = []JournalWindow{{Source: "jbd2_commit", Dev: "254:0", StartNs: 1, EndNs: 2}}
		},
		func(h *FsyncRecord) { h.Sched = &Sched{} },
		func(h *FsyncRecord) { h.Requests = []Request{} },
		func(h *FsyncRecord) { h.Requests = nil },
	}
	var e FsyncEncoder
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 2000; n++ {
		guest := benchRecord()
		guest.Requests = slices.Clone(guest.Requests)
		for k := 0; k < 1+rng.IntN(4); k++ {
			h := hosts[rng.IntN(len(hosts))]
			changes[rng.IntN(len(changes))](&h)
			q := Request{Role: RoleFlush, Dev: "7:0", Op: "FLUSH", Flags: []string{"PREFLUSH"}, Rwbs: "FF",
				IssueNs: h.StartNs - 10, CompleteNs: h.EndNs + 10, Host: []FsyncRecord{h}}
			guest.Requests = append(guest.Requests, q)
		}
		want, err := json.Marshal(&guest)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.Append(nil, &guest); !bytes.Equal(got, want) {
			t.Fatalf("record %d:\n got %s\nwant %s", n, got, want)
		}
	}
}

// TestSameShallowCoversEveryField: sameShallow compares each of
// FsyncRecord's fields; a field added to the record must be added there
// too, or the host cache could copy a stale encoding.
func TestSameShallowCoversEveryField(t *testing.T) {
	if n := reflect.TypeOf(FsyncRecord{}).NumField(); n != 26 {
		t.Fatalf("FsyncRecord has %d fields, sameShallow compares 26: compare the new ones and update this count", n)
	}
}
