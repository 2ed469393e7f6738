package render

import (
	"bytes"
	"fmt"
	"io"
)

// JSONText wraps w, to which a JSON text (or JSON Lines) is written, so
// that no byte of it is one a terminal acts on: encoding/json, and
// analysis.AppendJSON which writes its bytes, escape the C0 controls but
// leave DEL and the C1 controls (U+0080-U+009F, U+009B a CSI to terminals
// that take 8-bit controls) raw, and --output json goes to a terminal
// unless redirected. JSONText writes them as \u007f and \u0080-\u009f,
// which every JSON reader decodes to the same string. A JSON text's
// structure is ASCII and its strings valid UTF-8, where the bytes 0xc2
// 0x80-0x9f are always one of those runes, so the rewrite is by bytes;
// a 0xc2 a write ends with is held for the next. (jq decodes the escape
// and prints the rune raw, as it does any JSON's: jq -a escapes it.)
func JSONText(w io.Writer) io.Writer { return &jsonText{w: w} }

type jsonText struct {
	w       io.Writer
	pending bool // a 0xc2 ended the last write, not yet written
	buf     []byte
}

// Write writes p with DEL and C1 escaped; it reports len(p) on success.
func (j *jsonText) Write(p []byte) (int, error) {
	if !j.pending && bytes.IndexByte(p, 0x7f) < 0 && bytes.IndexByte(p, 0xc2) < 0 {
		return j.w.Write(p)
	}
	out := j.buf[:0]
	if j.pending {
		out = append(out, 0xc2)
		j.pending = false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == 0x7f:
			out = append(out, `\u007f`...)
		case c >= 0x80 && c <= 0x9f && len(out) > 0 && out[len(out)-1] == 0xc2:
			out = fmt.Appendf(out[:len(out)-1], `\u%04x`, c)
		case c == 0xc2 && i == len(p)-1:
			j.pending = true
		default:
			out = append(out, c)
		}
	}
	j.buf = out
	if _, err := j.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
