package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"regexp"
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
		summary: "a verdict from evidence you already have: etcd /metrics (files or a URL), Prometheus API JSON, etcd logs, fio output, etcdctl output",
		run:     runDiagnose,
	}
}

// maxInputBytes caps one input (file or HTTP body).
const maxInputBytes = 16 << 20

// maxTotalInputBytes caps all inputs together: each is read whole, and
// what diagnose makes of them grows with their sum (a hostile check,
// 2026-12-06: 16 zap logs of 16 MiB, 1.65 GiB; 8 metrics texts just under
// their cap, 630 MiB and 68 s).
const maxTotalInputBytes = 64 << 20

// inputBytes is the bytes the inputs hold together.
func inputBytes(ins []diagnose.Input) int {
	n := 0
	for _, in := range ins {
		n += len(in.Data)
	}
	return n
}

func runDiagnose(args []string) error {
	fs := newFlagSet("diagnose")
	fs.SortFlags = true
	output := fs.String("output", "table", "table or json")
	since := fs.String("since", "", "keep log lines and Prometheus samples at or after this time (RFC 3339, e.g. 2024-01-31T08:00:00Z)")
	until := fs.String("until", "", "keep log lines and Prometheus samples at or before this time (RFC 3339)")
	window := fs.Duration("window", 30*time.Second, "for a URL input: scrape it, wait this long, scrape again, and diagnose the difference")
	timeout := fs.Duration("timeout", 10*time.Second, "for a URL input: give up on one scrape after this long")
	failBad := fs.Bool("fail-over-budget", false, fmt.Sprintf("exit %d when a finding is bad (over one of etcd's budgets, e.g. WAL fsync p99 over %v), after printing the report, for a job to gate on", exitOverBudget, analysis.WALFsyncBudget))
	prom := fs.String("prometheus", "", "diagnose every etcd cluster in this Prometheus (or Thanos, Mimir) HTTP API over the window, e.g. http://prometheus:9090, instead of FILE|URL arguments")
	last := fs.Duration("last", 0, fmt.Sprintf("with --prometheus: the window ends now and is this long, e.g. 6h (default %s when no --since/--until)", defaultLast))
	match := fs.String("match", "", "with --prometheus: only series with these labels, e.g. '{job=\"etcd\"}'")
	maxClusters := fs.Int("max-clusters", 50, "with --prometheus: show the worst this many clusters; the others are counted and named")
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
	if *prom != "" {
		for _, f := range []string{"window", "timeout", "one-member"} {
			if fs.Changed(f) {
				return usagef("--%s is for /metrics files and URLs, not --prometheus (its queries time out after %s)", f, promQueryTimeout)
			}
		}
		return runFleet(fleetFlags{url: *prom, match: *match, since: opt.Since, until: opt.Until, last: *last, lastSet: fs.Changed("last"),
			maxClusters: *maxClusters, output: *output, failBad: *failBad}, fs.Args())
	}
	for _, f := range []string{"last", "match", "max-clusters"} {
		if fs.Changed(f) {
			return usagef("--%s goes with --prometheus URL", f)
		}
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
			urls = append(urls, a) // each member's suggested commands name its own
		case a == "-":
			b, err := readCapped(os.Stdin)
			inputs = append(inputs, diagnose.Input{Name: "stdin", Data: b, Err: err})
		default:
			inputs = append(inputs, readInput(a))
		}
		if total := inputBytes(inputs); total > maxTotalInputBytes {
			return usagef("the inputs hold more than %d MiB together (%s is where they passed it): give fewer, or cut each to the part that matters", maxTotalInputBytes>>20, a)
		}
	}
	if len(urls) > 0 {
		inputs = append(inputs, pollURLs(urls, *window, *timeout)...)
	}
	if total := inputBytes(inputs); total > maxTotalInputBytes {
		return usagef("the inputs hold more than %d MiB together: give fewer URLs or files, or cut each to the part that matters", maxTotalInputBytes>>20)
	}
	// Inputs from two or more clusters (their content names them) are
	// diagnosed apart, one report each.
	if groups := diagnose.SplitClusters(inputs); len(groups) > 1 {
		return diagnoseClusters(groups, opt, *output, *failBad)
	}
	// An input that cannot be read is listed in the report; only when
	// none can is the run a usage error.
	rep, err := diagnose.Diagnose(inputs, opt)
	if err != nil {
		if len(rep.Unread) == 1 && rep.Unread[0].Own != "" {
			return usagef("%s", render.DiagnoseUnreadError(rep.Unread[0]))
		}
		return usagef("%v", err)
	}
	for _, u := range rep.Unread {
		fmt.Fprintln(os.Stderr, render.DiagnoseUnread(u))
	}
	if *output == "json" {
		err = render.DiagnoseJSON(render.JSONText(os.Stdout), rep)
	} else {
		// Log lines and names quoted from the evidence: escaped.
		t := render.NewTerminal(os.Stdout)
		if err = render.Diagnose(t, rep); err == nil {
			err = t.Flush()
		}
	}
	if err != nil || !*failBad {
		return err
	}
	return badFindings(rep)
}

// diagnoseClusters diagnoses each cluster's inputs apart and prints the
// reports one after the other (JSON: one object with every cluster's); a
// usage error only when no input of any cluster could be read.
func diagnoseClusters(groups []diagnose.ClusterInputs, opt diagnose.Options, output string, failBad bool) error {
	var reps []render.ClusterReport
	var firstErr error
	for _, g := range groups {
		rep, err := diagnose.Diagnose(g.Inputs, opt)
		for _, u := range rep.Unread {
			fmt.Fprintln(os.Stderr, render.DiagnoseUnread(u))
		}
		if err != nil && len(rep.Inputs) == 0 {
			if firstErr == nil {
				firstErr = err
			}
			if len(rep.Unread) == 0 {
				continue
			}
		}
		reps = append(reps, render.ClusterReport{Cluster: g.Cluster, Report: rep})
	}
	read := 0
	for _, r := range reps {
		read += len(r.Report.Inputs)
	}
	if read == 0 {
		return usagef("%v", firstErr)
	}
	var err error
	if output == "json" {
		err = render.DiagnoseClustersJSON(render.JSONText(os.Stdout), reps)
	} else {
		t := render.NewTerminal(os.Stdout)
		if err = render.DiagnoseClusters(t, reps); err == nil {
			err = t.Flush()
		}
	}
	if err != nil || !failBad {
		return err
	}
	var errs []error
	for _, r := range reps {
		errs = append(errs, badFindings(r.Report))
	}
	return errors.Join(errs...)
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

// hostPortPath matches an argument that looks like host:port[/path], a
// URL without its scheme.
var hostPortPath = regexp.MustCompile(`^[A-Za-z0-9.\-\[\]:]+:[0-9]{1,5}(/.*)?$`)

// readInput reads one file argument; a file that cannot be read is an
// input with its error, for the report to list.
func readInput(name string) diagnose.Input {
	f, err := safefile.OpenInput(name) // a regular file: a FIFO must not block the run
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && hostPortPath.MatchString(name) {
			// host:port/metrics without a scheme reads as a file name.
			return diagnose.Input{Name: name, Err: fmt.Errorf("no such file; for a URL give its scheme: http://%s", name)}
		}
		// The report names the file once, before its error: the
		// error's words without the path.
		var pe *fs.PathError
		var nr *safefile.NotRegularError
		switch {
		case errors.As(err, &nr):
			err = fmt.Errorf("%s, not a regular file", nr.Kind)
		case errors.As(err, &pe):
			err = pe.Err
		}
		return diagnose.Input{Name: name, Err: fmt.Errorf("%w: give a readable file (or - for stdin)", err)}
	}
	defer f.Close()
	var size int64
	if st, err := f.Stat(); err == nil {
		size = st.Size()
	}
	if size > maxInputBytes {
		// Refused before it is read: nothing of it is held.
		return diagnose.Input{Name: name, Err: fmt.Errorf("larger than %d MiB: cut it to the part that matters", maxInputBytes>>20)}
	}
	// Read into a buffer of its size: io.ReadAll's doubling left up to
	// the file's size again in garbage per input.
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	_, err = buf.ReadFrom(io.LimitReader(f, maxInputBytes+1))
	if err == nil && buf.Len() > maxInputBytes {
		err = fmt.Errorf("larger than %d MiB: cut it to the part that matters", maxInputBytes>>20)
	}
	return diagnose.Input{Name: name, Data: buf.Bytes(), Err: err}
}

// pollURLs scrapes every URL now and once more after window; a URL
// unreachable or answering other than 200 at the first scrape is an input
// with its error (and is not scraped again); one failing the second keeps
// its first scrape.
func pollURLs(urls []string, window, timeout time.Duration) []diagnose.Input {
	cl := &http.Client{Timeout: timeout, CheckRedirect: sameHostRedirect}
	var out []diagnose.Input
	failed := map[string]bool{}
	for round := 0; round < 2; round++ {
		if round == 1 {
			if len(failed) == len(urls) {
				break
			}
			// The handler first, then the line that invites Ctrl-C: a
			// signal between the two killed the process (the verification
			// run's TestDiagnoseWindowInterrupted: SIGINT 1 ms after the
			// line, exit by signal).
			ctx, stop := runContext("diagnose", nil)
			fmt.Fprintln(os.Stderr, render.DiagnoseWaiting(window))
			select {
			case <-time.After(window):
			case <-ctx.Done():
				stop()
				fmt.Fprintln(os.Stderr, render.DiagnoseInterrupted())
				return out
			}
			stop()
		}
		for _, u := range urls {
			if failed[u] {
				continue
			}
			b, err := fetch(cl, u, timeout)
			if err == nil && round == 0 {
				// Not etcd's /metrics (an HTML page, a wrong port): say so
				// now, not after the window.
				if k, derr := diagnose.Detect(b); derr != nil || (k != diagnose.KindMetrics && k != diagnose.KindPromJSON) {
					err = fmt.Errorf("not Prometheus metrics text (%s)", contentOf(k, derr))
				}
			}
			if err != nil {
				failed[u] = true
				err = fmt.Errorf("%w (is it etcd's /metrics, e.g. http://127.0.0.1:2381/metrics, reachable from here?)", err)
				if round == 1 {
					err = fmt.Errorf("second scrape: %w; the first is diagnosed alone", err)
				}
				out = append(out, diagnose.Input{Name: u, Err: err})
				continue
			}
			out = append(out, diagnose.Input{Name: u, Data: b, At: time.Now()})
		}
	}
	return out
}

// sameHostRedirect refuses a redirect to another host (or scheme): the
// data would be labelled with the URL the user gave while it came from
// elsewhere (a loopback URL sent on to another address).
func sameHostRedirect(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	if req.URL.Host != first.Host || req.URL.Scheme != first.Scheme {
		return fmt.Errorf("redirected to %s://%s: give that URL itself if it is etcd's", req.URL.Scheme, req.URL.Host)
	}
	if len(via) >= 5 {
		return errors.New("more than 5 redirects")
	}
	return nil
}

// contentOf names what a fetched body is instead of etcd /metrics text.
func contentOf(k diagnose.Kind, err error) string {
	if err != nil {
		return "none of the kinds diagnose reads"
	}
	return string(k) + " content"
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
