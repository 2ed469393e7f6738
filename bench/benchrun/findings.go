package main

// findings is the analysis of the numbers above: causes found by profiling
// and the fixes proposed. It names mechanisms, not numbers, so it stays
// true when a rerun moves the numbers; the tables carry the numbers.
const findings = `(filled in below)
`
