package render

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape returns s with everything a terminal would act on made visible:
// C0 controls but the newline (ESC, CR, BS, tab...) and DEL as \xNN, C1
// controls (U+0080-U+009F) as \u00NN, each byte of invalid UTF-8 as
// \xNN, and the invisible characters that reorder or hide text (Unicode's
// format characters: the bidi overrides and isolates U+202A-U+202E and
// U+2066-U+2069, the zero-width U+200B-U+200F and U+FEFF, ...; and the
// line and paragraph separators U+2028, U+2029) as \uNNNN (\UNNNNNNNN
// past U+FFFF): a U+202E in a comm would show the rest of its line
// reversed. Comms, paths, member names and log lines come from other users'
// processes, recordings and pasted evidence: printed raw, an ESC sequence
// in one could rewrite root's terminal. s comes back unchanged when it has
// none of those.
func Escape(s string) string {
	clean := true
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if needsEscape(r, n) {
			clean = false
			break
		}
		i += n
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case needsEscape(r, n) && r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case needsEscape(r, n) && r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		case needsEscape(r, n):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// OneLine returns s, an outside string put inside a line of text (a
// comm, a file name, a label value), with its newlines written as \x0a:
// Escape keeps newlines, the lines' own, so a newline in a field would
// start a line of the field's choosing (a forged verdict). Escape (the
// Terminal) escapes the rest.
func OneLine(s string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	return strings.ReplaceAll(s, "\n", `\x0a`)
}

// EscapeLine is Escape of one line: its newlines escaped too (an error
// line, which quotes file names and what they hold).
func EscapeLine(s string) string { return Escape(OneLine(s)) }

// needsEscape: the rune r, n bytes long, is a control other than '\n', a
// byte of invalid UTF-8, or an invisible character (Invisible).
func needsEscape(r rune, n int) bool {
	return (r == utf8.RuneError && n == 1) || (r < 0x20 && r != '\n') || (r >= 0x7f && r <= 0x9f) || Invisible(r)
}

// Invisible reports whether r is a character that changes how the text
// around it shows without showing itself: a format character (Unicode
// category Cf: bidi controls, zero-width characters, the byte-order mark,
// soft hyphen, tags) or the line or paragraph separator.
func Invisible(r rune) bool {
	return r >= 0xad && (unicode.Is(unicode.Cf, r) || r == 0x2028 || r == 0x2029)
}

// Terminal collects a table and writes it, escaped (Escape), to its
// writer in one piece on Flush: the one way text with outside strings in
// it reaches a terminal. Escaping the whole text, not each write, keeps a
// rune split across writes whole.
type Terminal struct {
	w io.Writer
	b bytes.Buffer
}

// NewTerminal returns a Terminal that writes to w.
func NewTerminal(w io.Writer) *Terminal { return &Terminal{w: w} }

// Write adds p to the text.
func (t *Terminal) Write(p []byte) (int, error) { return t.b.Write(p) }

// Flush writes the text so far, escaped, and empties it.
func (t *Terminal) Flush() error {
	_, err := io.WriteString(t.w, Escape(t.b.String()))
	t.b.Reset()
	return err
}

// escaped runs table into a Terminal over w and flushes it.
func escaped(w io.Writer, table func(io.Writer) error) error {
	t := NewTerminal(w)
	if err := table(t); err != nil {
		return err
	}
	return t.Flush()
}
