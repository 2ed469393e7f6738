package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/diagnose"
	"github.com/etcdscope/etcdscope/internal/safefile"
	"github.com/etcdscope/etcdscope/render"
)

func init() {
	subcommands["diagnose"] = subcommand{
		summary: "a verdict from evidence you already have: etcd /metrics (files or a URL), Prometheus API JSON, etcd logs, fio output",
		run:     runDiagnose,
	}
}

// maxInputBytes caps one input (file or HTTP body).
const maxInputBytes = 16 << 20

func runDiagnose(args []string) error {
	fs := newFlagSet("diagnose")
	fs.SortFlags = true
	output := fs.String("output", "table", "table or json")
	since := fs.String("since", "", "keep log lines and Prometheus samples at or after this time (RFC 3339, e.g. 2024-01-31T08:00:00Z)")
	until := fs.String("until", "", "keep log lines and Prometheus samples at or before this time (RFC 3339)")
	window := fs.Duration("window", 30*time.Second, "for a URL input: scrape it, wait this long, scrape again, and diagnose the difference")
	timeout := fs.Duration("timeout", 10*time.Second, "for a URL input: give up on one scrape after this long")
	failBad := fs.Bool("fail-over-budget", false, fmt.Sprintf("exit %d when a finding is bad (over one of etcd's budgets, e.g. WAL fsync p99 over %v), after printing the report, for a job to gate on", exitOverBudget, analysis.WALFsyncBudget))
	oneMember := fs.Bool("one-member", false, "every /metrics input is a scrape of one member: diagnose their difference (for excerpts with no etcd_server_id, instance label or process_start_time_seconds)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errHelp
		}
		return usagef("%v (see 'etcdscope diagnose --help')", err)
	}
	if *output != "table" && *output != "json" {
		return usagef("--output %q: use table or json", *output)
	}
	opt := diagnose.Options{OneMember: *oneMember}
	for _, t := range []struct {
		flag, v string
		dst     *time.Time
	}{{"--since", *since, &opt.Since}, {"--until", *until, &opt.Until}} {
		if t.v == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339, t.v)
		if err != nil {
			return usagef("%s %q: give an RFC 3339 time, e.g. 2024-01-31T08:00:00Z", t.flag, t.v)
		}
		*t.dst = v
	}
	if !opt.Since.IsZero() && !opt.Until.IsZero() && opt.Until.Before(opt.Since) {
		return usagef("--until %s is before --since %s: no line or sample could be kept; swap them", *until, *since)
	}
	if *window <= 0 || *timeout <= 0 {
		return usagef("--window and --timeout must be positive durations, e.g. 30s")
	}
	if fs.NArg() == 0 {
		return usagef("give at least one file or URL, e.g. etcdscope diagnose metrics.txt etcd.log")
	}
	if n := slices.Index(fs.Args(), "-"); n >= 0 && slices.Contains(fs.Args()[n+1:], "-") {
		return usagef("- (stdin) given more than once: stdin is read once; save the other inputs to files")
	}
	var inputs []diagnose.Input
	var urls []string
	for _, a := range fs.Args() {
		switch {
		case strings.HasPrefix(a, "http://") || strings.HasPrefix(a, "https://"):
			urls = append(urls, a)
			if opt.MetricsURL == "" {
				opt.MetricsURL = a
			}
		case a == "-":
			b, err := readCapped(os.Stdin)
			if err != nil {
				return usagef("stdin: %v", err)
			}
			inputs = append(inputs, diagnose.Input{Name: "stdin", Data: b})
		default:
			f, err := safefile.OpenInput(a)
			if err != nil {
				return usagef("%v: give a readable file (or - for stdin)", err)
			}
			b, err := readCapped(f)
			f.Close()
			if err != nil {
				return usagef("%s: %v", a, err)
			}
			inputs = append(inputs, diagnose.Input{Name: a, Data: b})
		}
	}
	if len(urls) > 0 {
		polled, err := pollURLs(urls, *window, *timeout)
		if err != nil {
			return err
		}
		inputs = append(inputs, polled...)
	}
	rep, err := diagnose.Diagnose(inputs, opt)
	if errors.Is(err, diagnose.ErrUnknownContent) || errors.Is(err, diagnose.ErrNoEvidence) {
		return usagef("%v", err)
	}
	if err != nil {
		return usagef("%v (give the whole output it was cut from)", err)
	}
	if *output == "json" {
		err = diagnose.WriteJSON(os.Stdout, rep)
	} else {
		// Log lines and names quoted from the evidence: escaped.
		t := render.NewTerminal(os.Stdout)
		if err = diagnose.WriteTable(t, rep); err == nil {
			err = t.Flush()
		}
	}
	if err != nil || !*failBad {
		return err
	}
	return badFindings(rep)
}

// badFindings returns errOverBudget (exit 3) naming every bad finding's
// topic and subject, or nil when there is none.
func badFindings(rep diagnose.Report) error {
	var bad []string
	for _, f := range rep.Findings {
		if f.Severity == diagnose.Bad {
			bad = append(bad, f.Topic+" "+f.Subject)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d bad finding(s): %s", errOverBudget, len(bad), strings.Join(bad, "; "))
}

// readCapped reads at most maxInputBytes and fails beyond.
func readCapped(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxInputBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxInputBytes {
		return nil, fmt.Errorf("larger than %d MiB: cut it to the part that matters", maxInputBytes>>20)
	}
	return b, nil
}

// pollURLs scrapes every URL now and once more after window; an
// unreachable URL or a non-200 answer is a usage error.
func pollURLs(urls []string, window, timeout time.Duration) ([]diagnose.Input, error) {
	cl := &http.Client{Timeout: timeout}
	var out []diagnose.Input
	for round := 0; round < 2; round++ {
		if round == 1 {
			fmt.Fprintf(os.Stderr, "etcdscope diagnose: waiting %s for the second scrape\n", window)
			time.Sleep(window)
		}
		for _, u := range urls {
			b, err := fetch(cl, u, timeout)
			if err != nil {
				return nil, usagef("%s: %v (is it etcd's /metrics, e.g. http://127.0.0.1:2381/metrics, reachable from here?)", u, err)
			}
			out = append(out, diagnose.Input{Name: u, Data: b, At: time.Now()})
		}
	}
	return out, nil
}

func fetch(cl *http.Client, u string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %s", resp.Status)
	}
	return readCapped(resp.Body)
}
