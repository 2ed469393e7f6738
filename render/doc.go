// Package render is where etcdscope's text output is made: the fsync
// report table and its stacked-levels table, the JSON Lines stream of
// fsync records, the guest/host merge table, the peers table and the
// hypervisor's per-image table. Packages analysis and analysis/* compute
// the numbers and keep no formatting; the subcommands pick a renderer.
package render
