package render

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// maxLineRunes is the longest line a user should read in a terminal
// table or verdict (issue 26): the number and the cause first, the
// reasoning one docs/ link away.
const maxLineRunes = 200

// tableRow: a line with two or more runs of two spaces between words is a
// table row, whose width the columns set, not a sentence.
var tableRow = regexp.MustCompile(`\S {2,}\S`)

// cellGap separates a table row's cells.
var cellGap = regexp.MustCompile(` {2,}`)

// maxCellRunes is the widest cell a table row over maxLineRunes may hold
// and still count as columns: a wider cell is a sentence in a column
// (a window's why, a quoted input line), and the row counts as long.
const maxCellRunes = 80

// columnsOnly reports whether l is a table row made of columns only: two
// or more runs of two spaces between words, and no cell wider than
// maxCellRunes.
func columnsOnly(l string) bool {
	l = strings.TrimSpace(l)
	if len(tableRow.FindAllString(l, 2)) < 2 {
		return false
	}
	for _, c := range cellGap.Split(l, -1) {
		if utf8.RuneCountInString(c) > maxCellRunes {
			return false
		}
	}
	return true
}

// longLinesLeft is how many lines over maxLineRunes each golden still
// has (2026-12-07: none, down from 421 in the render goldens before the
// peers verdicts, diagnose findings and commit verdicts were cut, from 6
// before the capture fixtures' recorded "unavailable:" lines put their
// reason on a line of its own, render.Unavailable, and from 2 before fio's
// own complaints went each on a line under "fio ran no job"; table rows
// count since a cell may hold a sentence, columnsOnly: 3 left then, cut
// by the diagnose inputs' rejected line and the as-given window going on
// lines of their own). The test
// fails when a golden has more, and when it has fewer than listed (lower
// the number), so the list only shrinks.
var longLinesLeft = map[string]int{}

// textGoldens returns the paths of every text golden of the renderers and
// of the capture replays (the terminal output of each command), and the
// live output of a real peers run (testdata/loopback3).
func textGoldens(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, g := range []string{"../testdata/render/*.txt", "../testdata/render/*/*.txt", "../testdata/render/*/*/*.txt", "../testdata/capture/*.report.txt", "../testdata/loopback3/*.txt"} {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 90 {
		t.Fatalf("%d goldens found: the globs no longer match the testdata layout", len(files))
	}
	return files
}

// TestOutputLinesConcise reads every text golden of the renderers and of
// the capture replays and counts its prose lines over maxLineRunes.
func TestOutputLinesConcise(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range textGoldens(t) {
		name := strings.TrimPrefix(f, "../testdata/")
		seen[name] = true
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		n, first := 0, ""
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			if utf8.RuneCountInString(l) <= maxLineRunes || columnsOnly(l) {
				continue
			}
			if n == 0 {
				first = l
			}
			n++
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		switch left := longLinesLeft[name]; {
		case n > left:
			t.Errorf("%s: %d lines over %d characters (%d allowed); the first: %s", name, n, maxLineRunes, left, first)
		case n < left:
			t.Errorf("%s: %d lines over %d characters, %d listed: lower its longLinesLeft entry", name, n, maxLineRunes, left)
		}
	}
	for name := range longLinesLeft {
		if !seen[name] {
			t.Errorf("longLinesLeft lists %s, which is no golden: remove it", name)
		}
	}
}
