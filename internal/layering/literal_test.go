package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// maxLiteralRunes: no single-line string literal a user reads (a format,
// a sentence, a warning) is longer (issue 26): the number and the cause
// first, the reasoning in docs/, one link away. Golden outputs are
// checked line by line too (render TestOutputLinesConcise).
const maxLiteralRunes = 200

// wordingDirs are the packages whose strings reach a terminal, a page or
// a metric's Help.
var wordingDirs = []string{"render", "report", "exporter", "cmd/etcdscope", "netem", "pipeline", "tracer", "capture", "workload", "host", "node"}

// longLiteralsLeft: literals still over maxLiteralRunes, per file, and
// why (2026-12-07: none; the last two, paragraphs of the HTML page in
// report/merge.go and report/report.go, were cut to the number and the
// cause, their reasoning in docs/merge.md and docs/peers.md). The test
// fails when a file has more, and when it has fewer than listed, so the
// list only shrinks.
var longLiteralsLeft = map[string]struct {
	n   int
	why string
}{}

// TestNoLongLiterals fails on a single-line string literal over
// maxLiteralRunes in a non-test file of wordingDirs, naming file and line.
func TestNoLongLiterals(t *testing.T) {
	counts := map[string]int{}
	files := 0
	for _, dir := range wordingDirs {
		paths, err := filepath.Glob(filepath.Join("../..", dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range paths {
			if strings.HasSuffix(path, "_test.go") || strings.Contains(path, "_bpfel") {
				continue
			}
			files++
			rel := strings.TrimPrefix(filepath.ToSlash(path), "../../")
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil || strings.Contains(s, "\n") || utf8.RuneCountInString(s) <= maxLiteralRunes {
					return true
				}
				counts[rel]++
				if _, ok := longLiteralsLeft[rel]; !ok {
					t.Errorf("%s: a %d-character string (over %d): lead with the number and the cause, the why in docs/: %.100s...",
						fset.Position(lit.Pos()), utf8.RuneCountInString(s), maxLiteralRunes, s)
				}
				return true
			})
		}
	}
	if files < 100 {
		t.Fatalf("only %d files read: wrong directory?", files)
	}
	for rel, left := range longLiteralsLeft {
		if counts[rel] != left.n {
			t.Errorf("%s: %d long literals, %d listed (%s): make the entry say how many there are", rel, counts[rel], left.n, left.why)
		}
	}
}
