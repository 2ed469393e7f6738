// Package jsonl reads etcdscope's JSON Lines recordings: every record is
// one JSON object on a line with a "type" and a schema version "v"
// (docs/schema.md, docs/merge.md). Readers of each recording kind decode
// the records they know from the raw line.
package jsonl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Head is the part every record shares.
type Head struct {
	Type string `json:"type"`
	V    int    `json:"v"`
}

// MaxLine is the longest line Scan accepts, in bytes: an fsync record with
// many requests and nested host fsyncs stays far below it (kilobytes).
const MaxLine = 16 << 20

// MaxObjects is the most JSON objects, and the most arrays, one line may
// hold (its '{' and '[' bytes, counted before it is decoded): a line of
// 16 MiB of "{}" decodes into 5.6 million structs, gigabytes (a hostile
// check, 2026-12-06: one summary line, 6.1 GB), while the largest line a
// real run writes holds about a hundred (a summary of MaxGroups groups,
// a hypervisor summary of merge.MaxHostFiles images: a few thousand).
const MaxObjects = 1 << 16

// ErrTooManyObjects is returned (wrapped, with the line number) by Scan
// for a line of more than MaxObjects objects or arrays.
var ErrTooManyObjects = errors.New("holds more than 65536 JSON objects or arrays")

// ErrNotJSON is returned (wrapped, with the line number and the decoder's
// words) by Scan for a line that is not a JSON object: a binary file, a
// table printed instead of --output json, a cut line.
var ErrNotJSON = errors.New("is not a JSON object")

// ErrLineTooLong is returned (wrapped, with the line number) by Scan for a
// line longer than MaxLine.
var ErrLineTooLong = errors.New("is longer than 16 MiB")

// Scan calls fn with the 1-based line number, head and raw bytes of every
// non-blank line of r (raw is valid only during the call). A line that is
// not a JSON object fails with its number; so does any error fn returns,
// which Scan wraps with the line number.
func Scan(r io.Reader, fn func(line int, h Head, raw []byte) error) error {
	return ScanSpans(r, func(line int, _ Span, h Head, raw []byte) error { return fn(line, h, raw) })
}

// Span is where a line lies in its input: the offset of its first byte
// and its length in bytes, without the newline (or the CR before it). A
// reader of a regular file reads the line again from it (ReadAt) in a
// second pass, instead of holding it.
type Span struct {
	Off int64 // bytes from the start of the input
	Len int   // bytes, newline left out
}

// ScanSpans is Scan that also gives each line's Span in r.
func ScanSpans(r io.Reader, fn func(line int, at Span, h Head, raw []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), MaxLine)
	// bufio.ScanLines advances only with a token: the line starts where
	// the previous advance ended.
	var off, next int64
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		adv, tok, err := bufio.ScanLines(data, atEOF)
		if tok != nil {
			off = next
		}
		next += int64(adv)
		return adv, tok, err
	})
	lines := 0
	for n := 1; sc.Scan(); n++ {
		lines = n
		b := sc.Bytes()
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		if TooManyObjects(b, MaxObjects) {
			return fmt.Errorf("line %d %w", n, ErrTooManyObjects)
		}
		var h Head
		if err := json.Unmarshal(b, &h); err != nil {
			return fmt.Errorf("line %d %w (%v)", n, ErrNotJSON, describe(err))
		}
		if err := fn(n, Span{Off: off, Len: len(b)}, h, b); err != nil {
			var se *json.SyntaxError
			var te *json.UnmarshalTypeError
			switch {
			case errors.As(err, &se):
				return fmt.Errorf("line %d %w (%v)", n, ErrNotJSON, describe(err))
			case errors.As(err, &te):
				return fmt.Errorf("line %d: a %s record whose field %q is not a %s", n, h.Type, te.Field, te.Type)
			}
			return fmt.Errorf("line %d: %w", n, err)
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return fmt.Errorf("line %d %w", lines+1, ErrLineTooLong)
	}
	return sc.Err()
}

// describe shortens a decoding error to words without Go type names.
func describe(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("%s at byte %d", strings.TrimPrefix(se.Error(), "json: "), se.Offset)
	case errors.As(err, &te):
		return fmt.Errorf("field %q holds a JSON %s", te.Field, te.Value)
	}
	return err
}

// TooManyObjects reports whether b holds more than max '{' bytes or more
// than max '[' bytes: a cheap bound, before decoding, on the values JSON
// would make of it (a brace inside a string counts too, which only makes
// the bound stricter).
func TooManyObjects(b []byte, max int) bool {
	return bytes.Count(b, []byte("{")) > max || bytes.Count(b, []byte("[")) > max
}
