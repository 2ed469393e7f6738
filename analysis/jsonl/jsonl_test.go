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
	if err := Scan(strings.NewReader("{}\nnot json\n"), func(int, Head, []byte) error { return nil }); err == nil || !strings.HasPrefix(err.Error(), "line 2:") {
		t.Fatalf("bad line: %v", err)
	}
	boom := errors.New("boom")
	if err := Scan(strings.NewReader("{}\n"), func(int, Head, []byte) error { return boom }); !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "line 1:") {
		t.Fatalf("fn error: %v", err)
	}
}
