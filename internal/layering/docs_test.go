package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"testing"
)

// codeSpan is a `...` span of a markdown file.
var codeSpan = regexp.MustCompile("`([^`\n]+)`")

// goName is a span that names Go code: a package-qualified name, a method
// ((*T).M) or a bare exported or camelCase name, with an optional argument
// list or composite literal after it.
var goName = regexp.MustCompile(`^\*?(\(\*?[A-Za-z_][\w.]*\)\.)?[A-Za-z_][\w.]*(\(.*\)|\{.*\})?$`)

// cDecl is a span that names a C struct or enum of bpf/.
var cDecl = regexp.MustCompile(`^(struct|enum) (\w+)$`)

// etcdNames are etcd's own functions and messages the walk names (they
// are in etcd's code, not in this repository).
var etcdNames = map[string]bool{"WAL": true, "sync": true, "Save": true, "MsgAppResp": true, "processInternalRaftRequestOnce": true}

// stdPkgs are standard packages the doc names (their names are Go's).
var stdPkgs = map[string]bool{"fmt": true}

// TestArchitectureNamesExist reads docs/architecture.md, the newcomer's
// walk of one fsync and one etcd write, and checks that every file,
// directory, Go name and bpf/ struct or enum it names in backticks exists
// in the tree: the walk stays true to the code when a name moves.
func TestArchitectureNamesExist(t *testing.T) {
	tree := os.DirFS("../..")
	doc, err := fs.ReadFile(tree, "docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	decls, pkgs, bases := map[string]bool{}, map[string]bool{}, map[string]bool{}
	var bpfText strings.Builder
	err = fs.WalkDir(tree, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "vendor") {
				return fs.SkipDir
			}
			return nil
		}
		bases[name] = true
		switch {
		case strings.HasSuffix(name, ".go"):
			src, err := fs.ReadFile(tree, path)
			if err != nil {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			pkgs[f.Name.Name] = true
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.FuncDecl:
					decls[n.Name.Name] = true
				case *ast.TypeSpec:
					decls[n.Name.Name] = true
				case *ast.ValueSpec:
					for _, id := range n.Names {
						decls[id.Name] = true
					}
				case *ast.Field:
					for _, id := range n.Names {
						decls[id.Name] = true
					}
				}
				return true
			})
		case strings.HasPrefix(path, "bpf/") && (strings.HasSuffix(name, ".c") || strings.HasSuffix(name, ".h")):
			b, err := fs.ReadFile(tree, path)
			if err != nil {
				return err
			}
			bpfText.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, m := range codeSpan.FindAllStringSubmatch(string(doc), -1) {
		span := m[1]
		switch {
		case strings.Contains(span, " ") && !cDecl.MatchString(span) && !goName.MatchString(span):
			continue // a command line or an output line
		case strings.HasSuffix(span, ".go") || strings.HasSuffix(span, ".c") || strings.HasSuffix(span, ".h") || strings.HasSuffix(span, "/"):
			checked++
			if !strings.Contains(span, "/") {
				if !bases[span] {
					t.Errorf("docs/architecture.md names %s: no file of that name", span)
				}
				continue
			}
			if ms, _ := fs.Glob(tree, strings.TrimSuffix(span, "/")); len(ms) == 0 {
				t.Errorf("docs/architecture.md names %s: not in the tree", span)
			}
		case cDecl.MatchString(span):
			checked++
			c := cDecl.FindStringSubmatch(span)
			if !strings.Contains(bpfText.String(), c[1]+" "+c[2]+" {") {
				t.Errorf("docs/architecture.md names %s: not declared in bpf/", span)
			}
		case goName.MatchString(span) && strings.ContainsAny(span, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"):
			checked++
			// The name's own identifiers, its argument list or literal left out.
			head := span
			if i := strings.IndexAny(head, "({"); i > 0 && !strings.HasPrefix(head, "(") {
				head = head[:i]
			} else if strings.HasPrefix(head, "(") {
				if i := strings.IndexAny(head[1:], "({"); i >= 0 && strings.Contains(head[1+i:], ")") && head[1+i] == '(' {
					head = head[:1+i]
				}
			}
			ids := regexp.MustCompile(`[A-Za-z_]\w*`).FindAllString(head, -1)
			if stdPkgs[ids[0]] {
				continue
			}
			for _, id := range ids {
				if pkgs[id] || decls[id] || etcdNames[id] {
					continue
				}
				t.Errorf("docs/architecture.md names %s: %s is declared nowhere in the tree", span, id)
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d names checked in docs/architecture.md: the patterns no longer match its spans", checked)
	}
}
