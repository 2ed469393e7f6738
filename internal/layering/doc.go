// Package layering holds no code: its test pins which packages of etcdscope
// may depend on which (the one-way data flow of docs/architecture.md:
// kernel → tracer → pipeline → analysis → sinks, with host facts and event
// types on the side). It fails when a change makes a package import,
// directly or not, one it must not, and when a file under analysis/ writes
// prose or lays out a table (prose_test.go: those words are render's and
// report's), when cmd/etcdscope prints a string literal instead of render's
// line (cmdwords_test.go), and when docs/architecture.md's walk names a
// file, Go name or bpf/ struct the tree no longer has (docs_test.go).
package layering
