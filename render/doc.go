// Package render is where etcdscope's text output is made: the fsync
// report table and its stacked-levels table, the JSON Lines stream of
// fsync records, the guest/host merge table, the peers table, the
// hypervisor's per-image table, `etcdscope commit`'s table, verdicts
// and JSON summary, diagnose's findings and tables, and the one-line
// notices the long-running commands write on stderr (notices.go). What a
// user reads first, the verdict and its number, is on each table's first
// screen (firstscreen_test.go). Packages analysis and analysis/* compute
// the numbers and keep no formatting; the subcommands pick a renderer.
// Every table reaches its writer through a Terminal, which escapes the
// controls and invalid UTF-8 that comms, paths, member names and log lines
// from outside may hold (Escape); JSON output is escaped by its encoder.
package render
