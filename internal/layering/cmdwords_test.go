package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// cmd/etcdscope holds flags and wiring only (docs/architecture.md): the
// lines it writes are render's. What can be checked mechanically of that:
// no fmt.Print*/Fprint* call in a non-test file of cmd/etcdscope is given
// a string literal (a format, a word, a piece of a sentence), except in
// the functions below, which lay out the usage from the flags and the
// subcommand table (help's wiring). A usage error
// (usagef) is worded where its flag is parsed and is not checked here.
var cmdWordExceptions = map[string]string{
	"help.go:writeHelp":  "a command's usage, built from its flag set",
	"main.go:run":        "the version command's usage",
	"main.go:printUsage": "the command list, from the subcommand table",
	"netem.go:runNetem":  "netem's verb list",
}

// TestCmdWritesRenderWords fails on a print call in cmd/etcdscope given a
// string literal outside cmdWordExceptions, naming the file and line.
func TestCmdWritesRenderWords(t *testing.T) {
	files, err := filepath.Glob("../../cmd/etcdscope/*.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 15 {
		t.Fatalf("only %d files in cmd/etcdscope: wrong directory?", len(files))
	}
	used := map[string]bool{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		found, err := cmdWordsIn(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range found {
			key := filepath.Base(path) + ":" + f.fn
			if _, ok := cmdWordExceptions[key]; ok {
				used[key] = true
				continue
			}
			t.Errorf("cmd/etcdscope/%s line %d (%s): fmt.%s given a string literal: word the line in render/ (render/notices.go) and print its result", filepath.Base(path), f.line, f.fn, f.call)
		}
	}
	for key, why := range cmdWordExceptions {
		if !used[key] {
			t.Errorf("exception %s (%s) matches no print call any more: drop it", key, why)
		}
	}
}

type cmdWord struct {
	fn, call string
	line     int
}

// cmdWordsIn returns each fmt.Print*/Fprint* call of the Go file at path
// (or src when not nil) given a string literal, with its function.
func cmdWordsIn(path string, src any) ([]cmdWord, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var found []cmdWord
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); !ok || id.Name != "fmt" || !isProse(sel.Sel.Name, false) {
				return true
			}
			args := call.Args
			if strings.HasPrefix(sel.Sel.Name, "F") && len(args) > 0 {
				args = args[1:] // the writer
			}
			for _, a := range args {
				lit := false
				ast.Inspect(a, func(n ast.Node) bool {
					if _, ok := n.(*ast.CallExpr); ok {
						return false // a function's result: render's
					}
					if bl, ok := n.(*ast.BasicLit); ok && bl.Kind == token.STRING {
						lit = true
					}
					return !lit
				})
				if lit {
					found = append(found, cmdWord{fn: fd.Name.Name, call: sel.Sel.Name, line: fset.Position(call.Pos()).Line})
					break
				}
			}
			return true
		})
	}
	return found, nil
}

// TestCmdWordsInPlanted: the check finds a format, a literal word and a
// concatenation, and lets a render function's result and a variable be.
func TestCmdWordsInPlanted(t *testing.T) {
	src := `package main

func a() {
	fmt.Fprintf(os.Stderr, "etcdscope x: %s\n", v)
	fmt.Println("applied:", v)
	fmt.Fprintln(os.Stderr, "etcdscope: "+v)
	fmt.Fprintln(os.Stderr, render.Line(v, "x"))
	fmt.Println(line)
	fmt.Print(t)
}
`
	found, err := cmdWordsIn("planted.go", src)
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for _, f := range found {
		lines = append(lines, f.line)
	}
	if len(lines) != 3 || lines[0] != 4 || lines[1] != 5 || lines[2] != 6 {
		t.Errorf("found on lines %v, want [4 5 6]", lines)
	}
}
