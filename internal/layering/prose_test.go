package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// analysis returns numbers and typed results; render/, report/ and
// exporter/ write every word a user reads (docs/architecture). What can be
// checked mechanically of that: no non-test file under analysis/ writes
// text to a writer or stdout (fmt.Fprint, Fprintf, Fprintln, Print,
// Printf, Println) or lays out a table (text/tabwriter); and the packages
// in wordless call no fmt function but fmt.Errorf (their errors).
var proseCalls = []string{"Fprint", "Fprintf", "Fprintln", "Print", "Printf", "Println"}

// wordless: packages (directories from the repository root, their
// subpackages not included) that word nothing at all: no fmt call but
// fmt.Errorf, so no Sprintf of a sentence either (issue 26 moved
// analysis/commit's verdicts to render/commit.go, analysis/diagnose's
// findings to render/diagnose_findings.go and diagnose_words.go,
// analysis/etcdmetric's comparison verdict, estimate reasons and leader
// warning to render/peers.go and estimate.go; analysis's disk verdict
// reasons to render/diskwhy.go and its Ms to render.Ms). A package goes here once
// its last sentence has moved out; it does not come off.
var wordless = []string{"analysis", "analysis/commit", "analysis/diagnose", "analysis/etcdmetric", "analysis/jsonl", "analysis/stats"}

// isProse says whether fmt.name writes prose in a package, strictly for
// the wordless ones.
func isProse(name string, strict bool) bool {
	if strict {
		return name != "Errorf"
	}
	return slices.Contains(proseCalls, name)
}

// proseExceptions: files (from the repository root) allowed at most n
// prose calls, each with its reason. A file here that has fewer than n
// fails too, so the number only goes down. None is left (issue 26 moved
// the last, etcdmetric.Compare's verdict, to render/peers.go).
var proseExceptions = map[string]struct {
	n   int
	why string
}{}

// TestAnalysisWritesNoProse fails on a prose call or a tabwriter import in
// a non-test file under analysis/, naming the file and line.
func TestAnalysisWritesNoProse(t *testing.T) {
	counts := map[string]int{}
	var files []string
	err := filepath.WalkDir("../../analysis", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 20 {
		t.Fatalf("only %d files under analysis/: wrong directory?", len(files))
	}
	for _, path := range files {
		rel := strings.TrimPrefix(filepath.ToSlash(path), "../../")
		found, err := proseIn(path, nil, slices.Contains(wordless, filepath.ToSlash(filepath.Dir(rel))))
		if err != nil {
			t.Fatal(err)
		}
		counts[rel] = len(found)
		if ex, ok := proseExceptions[rel]; ok {
			if len(found) != ex.n {
				t.Errorf("%s: %d prose calls, its exception allows %d (%s): make the exception say how many there are", rel, len(found), ex.n, ex.why)
			}
			continue
		}
		for _, f := range found {
			t.Errorf("%s: analysis writes no prose or tables (render/, report/ do; docs/architecture.md): %s", rel, f)
		}
	}
	for _, dir := range wordless {
		if _, err := os.Stat(filepath.Join("../..", dir)); err != nil {
			t.Errorf("wordless package %s: %v", dir, err)
		}
	}
	for rel := range proseExceptions {
		if _, ok := counts[rel]; !ok {
			t.Errorf("exception for %s, which is not a file under analysis/ any more: drop it", rel)
		}
	}
}

// proseIn returns, for the Go file at path (or src when not nil), every
// prose call (with strict, every fmt call but fmt.Errorf) and tabwriter
// import as "line N: what".
func proseIn(path string, src any, strict bool) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var found []string
	fmtName := "" // the name "fmt" is imported under, if it is
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		switch p {
		case "text/tabwriter":
			found = append(found, "line "+strconv.Itoa(fset.Position(imp.Pos()).Line)+": imports text/tabwriter")
		case "fmt":
			fmtName = "fmt"
			if imp.Name != nil {
				fmtName = imp.Name.Name
			}
		}
	}
	if fmtName == "" || fmtName == "_" {
		return found, nil
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == fmtName && isProse(sel.Sel.Name, strict) {
			found = append(found, "line "+strconv.Itoa(fset.Position(sel.Pos()).Line)+": fmt."+sel.Sel.Name)
		}
		return true
	})
	return found, nil
}

// TestProseInPlanted: the check finds each kind of violation planted in
// a file (an aliased fmt, a call passed as a value, a tabwriter import)
// and lets fmt.Sprintf and fmt.Errorf be; in a wordless package every fmt
// call but fmt.Errorf is found.
func TestProseInPlanted(t *testing.T) {
	for _, c := range []struct {
		src    string
		want   int
		strict bool // in a wordless package
	}{
		{"package p\nimport \"fmt\"\nfunc f(w io.Writer) { fmt.Fprintf(w, \"the disk is slow\") }\n", 1, false},
		{"package p\nimport f \"fmt\"\nvar p = f.Println\n", 1, false},
		{"package p\nimport \"text/tabwriter\"\nvar w *tabwriter.Writer\n", 1, false},
		{"package p\nimport (\"fmt\"; \"text/tabwriter\")\nfunc g() { fmt.Print(1); _ = tabwriter.Writer{} }\n", 2, false},
		{"package p\nimport \"fmt\"\nfunc g() (string, error) { return fmt.Sprintf(\"%d ms\", 3), fmt.Errorf(\"reading: %w\", nil) }\n", 0, false},
		{"package p\ntype fmtT struct{}\nfunc (fmtT) Fprintf() {}\nvar fmt fmtT\nfunc g() { fmt.Fprintf() }\n", 0, false}, // no fmt import: not fmt's
		{"package p\nimport \"fmt\"\nfunc g() (string, error) { return fmt.Sprintf(\"%d ms\", 3), fmt.Errorf(\"reading: %w\", nil) }\n", 1, true},
		{"package p\nimport \"fmt\"\nfunc g() string { return fmt.Sprint(3) + fmt.Sprintln(\"writes wait\") }\nvar a = fmt.Appendf\n", 3, true},
		{"package p\nimport \"fmt\"\nfunc g() error { return fmt.Errorf(\"commit schema v%d\", 2) }\n", 0, true},
	} {
		found, err := proseIn("planted.go", c.src, c.strict)
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != c.want {
			t.Errorf("%q: found %v, want %d", c.src, found, c.want)
		}
	}
}
