// Package golden compares test output with golden files and says where
// they differ.
package golden

import (
	"strconv"
	"strings"
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
