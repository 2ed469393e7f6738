package jsonl

import (
	"errors"
	"strings"
	"testing"
)

func TestScan(t *testing.T) {
	in := "{\"type\":\"fsync\",\"v\":1}\n\n  \n{\"type\":\"summary\",\"v\":2,\"x\":3}\n"
	var got []string
	err := Scan(strings.NewReader(in), func(line int, h Head, raw []byte) error {
		got = append(got, strings.Join([]string{h.Type, string(rune('0' + h.V)), string(rune('0' + line))}, "/"))
		return nil
	})
	if err != nil || strings.Join(got, " ") != "fsync/1/1 summary/2/4" {
		t.Fatalf("got %v, %v", got, err)
	}
	if err := Scan(strings.NewReader("{}\nnot json\n"), func(int, Head, []byte) error { return nil }); !errors.Is(err, ErrNotJSON) || !strings.HasPrefix(err.Error(), "line 2 is not a JSON object (invalid character") {
		t.Fatalf("bad line: %v", err)
	}
	boom := errors.New("boom")
	if err := Scan(strings.NewReader("{}\n"), func(int, Head, []byte) error { return boom }); !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "line 1:") {
		t.Fatalf("fn error: %v", err)
	}
}

func TestScanLongLine(t *testing.T) {
	in := "{}\n" + strings.Repeat("x", MaxLine+1) + "\n"
	err := Scan(strings.NewReader(in), func(int, Head, []byte) error { return nil })
	if !errors.Is(err, ErrLineTooLong) || !strings.HasPrefix(err.Error(), "line 2 is longer than 16 MiB") {
		t.Fatalf("long line: %v", err)
	}
}

func TestScanFieldType(t *testing.T) {
	err := Scan(strings.NewReader(`{"type":"fsync","v":"one"}`), func(int, Head, []byte) error { return nil })
	if !errors.Is(err, ErrNotJSON) || strings.Contains(err.Error(), "Go ") || !strings.Contains(err.Error(), `field "v"`) {
		t.Fatalf("wrong field type: %v", err)
	}
}

// TestScanSpans: each line's Span names its bytes in the input (CRLF
// endings, blank lines and a last line without a newline included), so a
// second pass reads the line again from the file.
func TestScanSpans(t *testing.T) {
	in := "{\"type\":\"a\"}\r\n\n  \n{\"type\":\"b\",\"v\":1}\n{\"type\":\"c\"}"
	var got []string
	err := ScanSpans(strings.NewReader(in), func(_ int, at Span, _ Head, raw []byte) error {
		if again := in[at.Off : at.Off+int64(at.Len)]; again != string(raw) {
			t.Errorf("span %+v reads %q, the line is %q", at, again, raw)
		}
		got = append(got, string(raw))
		return nil
	})
	if err != nil || len(got) != 3 {
		t.Fatalf("got %q, %v", got, err)
	}
}

// TestScanBoundsObjects: a line of more than MaxObjects objects (or
// arrays) is refused before it is decoded (a hostile check: one summary
// line of 16 MiB of "{}" decoded to 6.1 GB); one of MaxObjects is read.
func TestScanBoundsObjects(t *testing.T) {
	line := func(n int, open string) string {
		return `{"type":"summary","v":1,"groups":[` + strings.TrimSuffix(strings.Repeat(open+",", n), ",") + "]}\n"
	}
	for _, c := range []struct {
		name string
		text string
		err  error
	}{
		{"objects at the bound", line(MaxObjects-1, "{}"), nil},
		{"objects over it", line(MaxObjects, "{}"), ErrTooManyObjects},
		{"arrays over it", line(MaxObjects, "[]"), ErrTooManyObjects},
	} {
		err := Scan(strings.NewReader(c.text), func(int, Head, []byte) error { return nil })
		if !errors.Is(err, c.err) {
			t.Errorf("%s: %v, want %v", c.name, err, c.err)
		}
	}
}

// TestNames: an enum's names round-trip; a value with no name and an
// unknown name are errors naming the field.
func TestNames(t *testing.T) {
	n := Names[int]{Kind: "color", Of: map[int]string{1: "red", 2: "blue"}}
	for v, s := range n.Of {
		b, err := n.Marshal(v)
		var back int
		if err != nil || string(b) != s || n.Unmarshal(b, &back) != nil || back != v {
			t.Errorf("%d: %q %v, read back %d", v, b, err, back)
		}
	}
	if _, err := n.Marshal(3); err == nil || err.Error() != "color 3 has no name" {
		t.Errorf("Marshal(3): %v", err)
	}
	var v int
	if err := n.Unmarshal([]byte("green"), &v); err == nil || err.Error() != `unknown color "green"` {
		t.Errorf("Unmarshal(green): %v", err)
	}
}
