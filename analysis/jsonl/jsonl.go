// Package jsonl reads etcdscope's JSON Lines recordings: every record is
// one JSON object on a line with a "type" and a schema version "v"
// (docs/schema.md, docs/merge.md). Readers of each recording kind decode
// the records they know from the raw line.
package jsonl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// Head is the part every record shares.
type Head struct {
	Type string `json:"type"`
	V    int    `json:"v"`
}

// MaxLine is the longest line Scan accepts, in bytes: an fsync record with
// many requests and nested host fsyncs stays far below it.
const MaxLine = 64 << 20

// Scan calls fn with the 1-based line number, head and raw bytes of every
// non-blank line of r (raw is valid only during the call). A line that is
// not a JSON object fails with its number; so does any error fn returns,
// which Scan wraps with the line number.
func Scan(r io.Reader, fn func(line int, h Head, raw []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), MaxLine)
	for n := 1; sc.Scan(); n++ {
		b := sc.Bytes()
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		var h Head
		if err := json.Unmarshal(b, &h); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		if err := fn(n, h, b); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
	}
	return sc.Err()
}
