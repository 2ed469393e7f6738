// Command flakehunt runs Go test packages N times, one fresh `go test
// -json -count=1` per round, and prints each test's pass rate, its worst
// time and its smallest margin to a bound: what docs/testing.md keeps.
// `make flake-hunt PKGS=./e2e N=10 [RUN=regexp]` runs it.
//
// A test states a margin by logging a line
//
//	flakehunt: margin NAME MEASURED of BOUND
//
// with two Go durations (or two plain numbers in one unit): the hunt keeps,
// per NAME, the run where MEASURED came closest to BOUND.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"
)

// testEvent is one line of `go test -json` (cmd/test2json).
type testEvent struct {
	Action  string
	Package string
	Test    string
	Elapsed float64 // seconds
	Output  string
}

// result is what the hunt learned of one test over every round.
type result struct {
	pass, fail, skip int
	worst            float64 // seconds, of a passing or failing run
}

// margin is the closest a named measurement came to its bound.
type margin struct {
	measured, bound float64
	text            string // as the test logged it
}

func main() {
	n := flag.Int("n", 10, "rounds")
	run := flag.String("run", "", "go test -run regexp")
	timeout := flag.String("timeout", "60m", "go test -timeout of each round")
	flag.Parse()
	pkgs := flag.Args()
	if len(pkgs) == 0 || *n < 1 {
		fmt.Fprintln(os.Stderr, "flakehunt: give -n N (at least 1) and one or more packages, e.g. flakehunt -n 10 ./e2e")
		os.Exit(2)
	}
	results := map[string]*result{}
	margins := map[string]margin{}
	start := time.Now()
	for round := 1; round <= *n; round++ {
		args := []string{"test", "-json", "-count=1", "-p", "1", "-timeout", *timeout}
		if *run != "" {
			args = append(args, "-run", *run)
		}
		cmd := exec.Command("go", append(args, pkgs...)...)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			fmt.Fprintln(os.Stderr, "flakehunt:", err)
			os.Exit(1)
		}
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "flakehunt:", err)
			os.Exit(1)
		}
		failed := read(out, results, margins, os.Stderr)
		cmd.Wait()
		fmt.Fprintf(os.Stderr, "flakehunt: round %d of %d done at %v, %d failed\n", round, *n, time.Since(start).Round(time.Second), failed)
	}
	writeTable(os.Stdout, *n, results, margins)
}

// read folds one round's JSON events into results and margins, writes the
// output of every test that failed to failOut (the evidence a hunt is
// for), and returns how many tests failed in it.
func read(r io.Reader, results map[string]*result, margins map[string]margin, failOut io.Writer) int {
	failed := 0
	output := map[string][]string{} // this round's output per test, until it ends
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev testEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Test == "" {
			continue
		}
		name := ev.Package + " " + ev.Test
		if ev.Action == "output" {
			if len(output[name]) < maxFailLines {
				output[name] = append(output[name], ev.Output)
			}
			if m, key, ok := parseMargin(ev.Output); ok {
				if old, seen := margins[key]; !seen || m.bound-m.measured < old.bound-old.measured {
					margins[key] = m
				}
			}
			continue
		}
		res := results[name]
		if res == nil {
			res = &result{}
			results[name] = res
		}
		switch ev.Action {
		case "pass":
			res.pass++
		case "fail":
			res.fail++
			failed++
			fmt.Fprintf(failOut, "flakehunt: FAIL %s; its output:\n%s", name, strings.Join(output[name], ""))
		case "skip":
			res.skip++
			continue
		default:
			continue
		}
		delete(output, name)
		res.worst = max(res.worst, ev.Elapsed)
	}
	return failed
}

// maxFailLines bounds the output kept per test in a round.
const maxFailLines = 400

// parseMargin reads a "flakehunt: margin NAME MEASURED of BOUND" line.
func parseMargin(line string) (margin, string, bool) {
	_, rest, ok := strings.Cut(line, "flakehunt: margin ")
	if !ok {
		return margin{}, "", false
	}
	f := strings.Fields(rest)
	if len(f) != 4 || f[2] != "of" {
		return margin{}, "", false
	}
	m, okM := number(f[1])
	b, okB := number(f[3])
	if !okM || !okB {
		return margin{}, "", false
	}
	return margin{measured: m, bound: b, text: f[1] + " of " + f[3]}, f[0], true
}

// number reads a Go duration (as seconds) or a plain number.
func number(s string) (float64, bool) {
	if d, err := time.ParseDuration(s); err == nil {
		return d.Seconds(), true
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

func writeTable(w io.Writer, rounds int, results map[string]*result, margins map[string]margin) {
	names := make([]string, 0, len(results))
	for k := range results {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := results[names[i]], results[names[j]]
		if a.fail != b.fail {
			return a.fail > b.fail
		}
		return names[i] < names[j]
	})
	fmt.Fprintf(w, "| test | passed | failed | skipped | worst time |\n|---|---|---|---|---|\n")
	for _, k := range names {
		r := results[k]
		fmt.Fprintf(w, "| %s | %d/%d | %d | %d | %.2f s |\n", k, r.pass, rounds, r.fail, r.skip, r.worst)
	}
	if len(margins) == 0 {
		return
	}
	keys := make([]string, 0, len(margins))
	for k := range margins {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "\n| measurement | closest to its bound (%d rounds) | margin |\n|---|---|---|\n", rounds)
	for _, k := range keys {
		m := margins[k]
		fmt.Fprintf(w, "| %s | %s | %.0f%% |\n", k, m.text, 100*(m.bound-m.measured)/m.bound)
	}
}
