package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/etcdscope/etcdscope/analysis"
)

func init() {
	subcommands["report"] = subcommand{
		summary: "recompute the fsync report from a recording (etcdscope fsync --output json)",
		run:     runReport,
	}
}

func runReport(args []string) error {
	fs := pflag.NewFlagSet("report", pflag.ContinueOnError)
	output := fs.String("output", "table", "table or json")
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: etcdscope report [--output table|json] RECORDING.jsonl (- for stdin)\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errHelp
		}
		return usagef("%v (see 'etcdscope report --help')", err)
	}
	if *output != "table" && *output != "json" {
		return usagef("--output %q: use table or json", *output)
	}
	if fs.NArg() != 1 {
		return usagef("give one recording file, e.g. etcdscope report trace.jsonl")
	}
	var in io.Reader = os.Stdin
	if name := fs.Arg(0); name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return usagef("%v", err)
		}
		defer f.Close()
		in = f
	}
	recs, sum, err := analysis.ReadJSONL(in)
	if err != nil {
		return usagef("reading %s: %v", fs.Arg(0), err)
	}
	rep := analysis.BuildReport(recs, sum.LostEvents, sum.MissedEvents, sum.Unavailable)
	if *output == "json" {
		return json.NewEncoder(os.Stdout).Encode(rep)
	}
	return rep.WriteTable(os.Stdout)
}
