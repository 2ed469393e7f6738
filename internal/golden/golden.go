// Package golden compares test output with golden files and says where
// they differ.
package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FirstDiff shows the first line where got and want differ, each cut at
// 400 bytes, or says that only the bytes differ (a trailing newline, say).
func FirstDiff(got, want []byte) string {
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(gl) || i < len(wl); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			return "line " + strconv.Itoa(i+1) + ":\n got: " + cut(g) + "\nwant: " + cut(w)
		}
	}
	return "(same lines, different bytes)"
}

func cut(s string) string {
	if len(s) > 400 {
		return s[:400] + "..."
	}
	return s
}

// File compares got with the golden file at path, first writing got there
// when update is set (only when a change of output is intended).
func File(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n%s", path, FirstDiff(got, want))
	}
}
