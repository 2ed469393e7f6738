package jsonl

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzScan feeds Scan arbitrary recordings: it must not panic, every line
// it hands on is a JSON object, and every error is one of its own (a line
// number and the fix, never a bare decoder error).
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		"{\"type\":\"fsync\",\"v\":1}\n\n{\"type\":\"summary\",\"v\":1}\n",
		"not json\n",
		"{\"type\":1}\n",
		"\x00\x01\x02\xff\n{}",
		"{\"v\":\"x\"}",
		"[1,2]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		err := Scan(bytes.NewReader(in), func(line int, h Head, raw []byte) error {
			if line < 1 || len(bytes.TrimSpace(raw)) == 0 {
				t.Fatalf("line %d handed on: %q", line, raw)
			}
			return nil
		})
		if err != nil && !errors.Is(err, ErrNotJSON) && !errors.Is(err, ErrLineTooLong) {
			t.Fatalf("error %v is neither ErrNotJSON nor ErrLineTooLong", err)
		}
	})
}
