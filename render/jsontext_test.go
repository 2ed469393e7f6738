package render

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestJSONTextEscapesC1: a record whose strings hold DEL and every C1
// control, encoded by encoding/json (which writes them raw) and written
// through JSONText in pieces of every size (a 0xc2 split from its second
// byte), comes out with none of those bytes raw, decodes to the same
// value, and leaves other text (é, U+00A0, ASCII) byte for byte.
func TestJSONTextEscapesC1(t *testing.T) {
	var s []rune
	for r := rune(0x7f); r <= 0x9f; r++ {
		s = append(s, 'a', r)
	}
	// and the invisible ones (issue 25): bidi overrides and isolates,
	// zero-width characters, a tag past U+FFFF (a surrogate pair).
	in := map[string]string{"comm": string(s), "path": "/é\u00a0x", "plain": "etcd", "bidi": "a\u202eb\u2066c\u2069\u200b\u200f\ufeff\u2028\U000e0041z"}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("\xc2\x9b")) {
		t.Fatal("encoding/json no longer writes C1 raw: JSONText may be moot")
	}
	for size := 1; size <= len(b); size++ {
		var out bytes.Buffer
		w := JSONText(&out)
		for i := 0; i < len(b); i += size {
			n, err := w.Write(b[i:min(i+size, len(b))])
			if err != nil || n != min(size, len(b)-i) {
				t.Fatalf("write of %d: %d, %v", size, n, err)
			}
		}
		got := out.Bytes()
		if i := bytes.IndexFunc(got, func(r rune) bool { return r >= 0x7f && r <= 0x9f || Invisible(r) }); i >= 0 {
			t.Fatalf("pieces of %d: %q raw at byte %d: %q", size, got[i], i, got)
		}
		var back map[string]string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("pieces of %d: %v: %q", size, err, got)
		}
		for k, v := range in {
			if back[k] != v {
				t.Fatalf("pieces of %d: %s decodes to %q, want %q", size, k, back[k], v)
			}
		}
		if !bytes.Contains(got, []byte(`"/é`+"\u00a0"+`x"`)) || !bytes.Contains(got, []byte(`\u009b`)) || !bytes.Contains(got, []byte(`a\u202eb\u2066c\u2069\u200b\u200f\ufeff\u2028\udb40\udc41z`)) {
			t.Fatalf("pieces of %d: %s", size, got)
		}
	}
}

// TestASCIIWords checks ascii's eight-bytes-a-step test against the byte
// loop: every byte value at every position of words and tails, and the
// carries (0xff, 0x7f next to 0x7e and 0x80).
func TestASCIIWords(t *testing.T) {
	slow := func(p []byte) bool {
		for _, c := range p {
			if c >= 0x7f {
				return false
			}
		}
		return true
	}
	for n := 0; n <= 43; n++ {
		for pos := 0; pos < n; pos++ {
			for c := 0; c < 256; c++ {
				p := bytes.Repeat([]byte{'a'}, n)
				p[pos] = byte(c)
				if got, want := ascii(p), slow(p); got != want {
					t.Fatalf("ascii(%x) = %v, want %v", p, got, want)
				}
				for _, d := range []byte{0x7e, 0x7f, 0x80, 0xff, 0x00} {
					q := append([]byte(nil), p...)
					if pos+1 < n {
						q[pos+1] = d
					}
					if got, want := ascii(q), slow(q); got != want {
						t.Fatalf("ascii(%x) = %v, want %v", q, got, want)
					}
				}
			}
		}
	}
}

func BenchmarkASCII(b *testing.B) {
	p := bytes.Repeat([]byte(`{"type":"fsync","pid":1234,"comm":"etcd"}`), 1600)[:64<<10]
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		if !ascii(p) {
			b.Fatal("not ascii")
		}
	}
}
