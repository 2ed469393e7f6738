package tracer

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocNamesEveryProbe keeps the package doc's two tables whole: every
// probe object (bpf/<probe>.bpf.c, but netem's classifier) is a row of the
// probe table, and every exported *Tracer type a row of the tracer table.
func TestDocNamesEveryProbe(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	row := func(name string) bool {
		return regexp.MustCompile(`(?m)^//\t` + regexp.QuoteMeta(name) + `\s`).Match(doc)
	}
	objs, err := filepath.Glob("../bpf/*.bpf.c")
	if err != nil || len(objs) == 0 {
		t.Fatalf("no bpf/*.bpf.c: %v", err)
	}
	for _, o := range objs {
		probe := strings.TrimSuffix(filepath.Base(o), ".bpf.c")
		if probe == "classifier" {
			if !strings.Contains(string(doc), "classifier.bpf.c") {
				t.Error("doc.go does not say where bpf/classifier.bpf.c belongs")
			}
			continue
		}
		if !row(probe) {
			t.Errorf("probe %s (bpf/%s.bpf.c) has no row in doc.go's probe table", probe, probe)
		}
	}
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go") && !strings.Contains(fi.Name(), "_bpfel")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.TYPE {
					continue
				}
				for _, sp := range g.Specs {
					name := sp.(*ast.TypeSpec).Name.Name
					if ast.IsExported(name) && strings.HasSuffix(name, "Tracer") && name != "Tracer" {
						n++
						if !row(name) {
							t.Errorf("%s has no row in doc.go's tracer table", name)
						}
					}
				}
			}
		}
	}
	if n == 0 {
		t.Error("no exported *Tracer type found")
	}
}
