package render

import (
	"encoding/binary"
	"fmt"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// JSONText wraps w, to which a JSON text (or JSON Lines) is written, so
// that no character of it is one a terminal acts on or that hides text:
// encoding/json, and analysis.AppendJSON which writes its bytes, escape
// the C0 controls but leave DEL, the C1 controls (U+0080-U+009F, U+009B a
// CSI to terminals that take 8-bit controls) and the invisible characters
// (Invisible: the bidi overrides and isolates, zero-width characters)
// raw, and --output json goes to a terminal unless redirected. JSONText
// writes them as \u escapes (a surrogate pair past U+FFFF), which every
// JSON reader decodes to the same string. A JSON text's structure is ASCII
// and its strings valid UTF-8, so the rewrite is by runes; a rune a write
// cuts is held for the next. (jq decodes the escape and prints the rune
// raw, as it does any JSON's: jq -a escapes it.)
func JSONText(w io.Writer) io.Writer { return &jsonText{w: w} }

type jsonText struct {
	w       io.Writer
	pending []byte // the start of a rune the last write cut, not yet written
	in, buf []byte
}

// Write writes p with DEL, C1 and invisible characters escaped; it
// reports len(p) on success.
func (j *jsonText) Write(p []byte) (int, error) {
	if len(j.pending) == 0 && ascii(p) {
		return j.w.Write(p)
	}
	in := append(append(j.in[:0], j.pending...), p...)
	j.in = in
	cut := len(in) // in[cut:]: a rune cut short, held
	for k := 1; k <= utf8.UTFMax-1 && k <= len(in); k++ {
		if c := in[len(in)-k]; c < 0x80 {
			break
		} else if utf8.RuneStart(c) {
			if !utf8.FullRune(in[len(in)-k:]) {
				cut = len(in) - k
			}
			break
		}
	}
	j.pending = append(j.pending[:0], in[cut:]...)
	out := j.buf[:0]
	for i := 0; i < cut; {
		if c := in[i]; c < 0x7f {
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(in[i:cut])
		switch {
		case (r == utf8.RuneError && n == 1) || !(r <= 0x9f || Invisible(r)):
			out = append(out, in[i:i+n]...)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += n
	}
	j.buf = out
	if _, err := j.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// ascii reports whether p has no byte past 0x7e (DEL and above). It runs
// on every byte of --output json (64 KiB a flush): eight bytes a step, a
// byte-at-a-time loop was ~9% of the reader's CPU at 10k fsync/s.
func ascii(p []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(p) >= 32 {
		a, b := binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[8:])
		c, d := binary.LittleEndian.Uint64(p[16:]), binary.LittleEndian.Uint64(p[24:])
		if (a|(a+ones)|b|(b+ones)|c|(c+ones)|d|(d+ones))&highs != 0 {
			return false
		}
		p = p[32:]
	}
	for len(p) >= 8 {
		// A byte's high bit is set in x when it is 0x80 or above, in
		// x+ones when it is 0x7f; a carry out of a byte needs 0xff,
		// whose own high bit is already set in x.
		x := binary.LittleEndian.Uint64(p)
		if (x|(x+ones))&highs != 0 {
			return false
		}
		p = p[8:]
	}
	for _, c := range p {
		if c >= 0x7f {
			return false
		}
	}
	return true
}
