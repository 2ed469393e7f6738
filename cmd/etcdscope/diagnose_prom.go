package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/etcdscope/etcdscope/analysis/diagnose"
	"github.com/etcdscope/etcdscope/render"
)

// diagnose --prometheus: the fleet's etcd metrics from one Prometheus
// (or Thanos, Mimir) HTTP API, every cluster diagnosed (analysis/diagnose
// ReadFleet).

const (
	// promQueryTimeout bounds one query_range request; promDeadline the
	// whole run's requests.
	promQueryTimeout = 30 * time.Second
	promDeadline     = 2 * time.Minute
	// defaultLast: the window when no --since, --until or --last is given.
	defaultLast = time.Hour
)

// fleetFlags are diagnose's --prometheus flags, as given.
type fleetFlags struct {
	url, match   string
	since, until time.Time
	last         time.Duration
	lastSet      bool
	maxClusters  int
	output       string
	failBad      bool
}

// runFleet checks the flags, queries Prometheus and writes the fleet.
func runFleet(f fleetFlags, files []string) error {
	u, err := url.Parse(f.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--prometheus %q: give Prometheus' base URL, e.g. http://prometheus:9090", f.url)
	}
	if len(files) > 0 {
		return usagef("--prometheus reads only Prometheus: diagnose %s in a run of its own", strings.Join(files, " "))
	}
	if f.lastSet && (!f.since.IsZero() || !f.until.IsZero()) {
		return usagef("--last with --since or --until: give either a window (--since/--until) or --last")
	}
	if f.lastSet && f.last <= 0 {
		return usagef("--last %s: give a positive duration, e.g. 6h", f.last)
	}
	if f.maxClusters < 1 {
		return usagef("--max-clusters %d: give at least 1", f.maxClusters)
	}
	if m := strings.TrimSpace(f.match); m != "" && (!strings.HasPrefix(m, "{") || !strings.HasSuffix(m, "}") || strings.Count(m, "{") != 1 || strings.Count(m, "}") != 1) {
		return usagef("--match %q: give label matchers in braces, e.g. '{job=\"etcd\"}'", f.match)
	}
	since, until := f.since, f.until
	now := time.Now().UTC()
	switch {
	case f.lastSet:
		since, until = now.Add(-f.last), now
	case since.IsZero() && until.IsZero():
		since, until = now.Add(-defaultLast), now
	case until.IsZero():
		until = now
	case since.IsZero():
		since = until.Add(-defaultLast)
	}
	if !until.After(since) {
		return usagef("--since %s is not before --until %s: give a window", since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	base := strings.TrimSuffix(f.url, "/")
	// Ctrl-C (or SIGTERM) ends the queries at once, also in a background
	// job where SIGINT starts ignored (the window wait had that bug).
	sigCtx, stop := runContext("diagnose", nil)
	defer stop()
	ctx, cancel := context.WithTimeout(sigCtx, promDeadline)
	defer cancel()
	cl := &http.Client{Timeout: promQueryTimeout}
	// The probe: the raw samples of one gauge per member say the scrape
	// interval (the grid's step) and the history held. No answer, or one
	// that is no Prometheus JSON or over the body's bound (a large fleet
	// scraped every second holds millions of samples an hour), leaves the
	// grid at FleetSteps: the queries below say what the URL is.
	b, err := promGet(ctx, cl, base, "/api/v1/query", url.Values{"query": {diagnose.FleetProbeQuery(f.match, since, until)}, "time": {promTime(until)}})
	if sigCtx.Err() != nil {
		return errors.New("interrupted: nothing diagnosed")
	}
	if err != nil {
		b = nil
	}
	probe, _ := diagnose.ReadFleetProbe(b)
	start, end, step := diagnose.FleetRange(since, until, probe)
	var answers []diagnose.PromAnswer
	for _, sel := range diagnose.FleetSelectors(f.match) {
		q := url.Values{"query": {sel}, "start": {promTime(start)}, "end": {promTime(end)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', 3, 64)}}
		b, err := promGet(ctx, cl, base, "/api/v1/query_range", q)
		if sigCtx.Err() != nil {
			return errors.New("interrupted: nothing diagnosed")
		}
		if err != nil {
			return err
		}
		answers = append(answers, diagnose.PromAnswer{Selector: sel, Body: b})
	}
	endsNow := f.lastSet || (f.since.IsZero() && f.until.IsZero())
	fl, err := diagnose.ReadFleet(answers, diagnose.FleetOptions{Source: base, From: since, To: until, Match: f.match, MaxClusters: f.maxClusters,
		Probe: probe, Step: step, EndsNow: endsNow})
	if errors.Is(err, diagnose.ErrNotPrometheus) {
		return usagef("%s answered /api/v1/query_range with no Prometheus API JSON (%v): give Prometheus' base URL, e.g. http://prometheus:9090", base, err)
	}
	if err != nil {
		return usagef("%v", err)
	}
	if len(fl.Clusters) == 0 {
		return usagef("%s holds no etcd series matching %q from %s to %s: check --match and the window", base, f.match, since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	if f.output == "json" {
		err = render.DiagnoseFleetJSON(render.JSONText(os.Stdout), fl)
	} else {
		// Label values quoted from Prometheus: escaped.
		t := render.NewTerminal(os.Stdout)
		if err = render.DiagnoseFleet(t, fl); err == nil {
			err = t.Flush()
		}
	}
	if err != nil || !f.failBad {
		return err
	}
	for _, c := range fl.Clusters {
		if err := badFindings(c.Report); err != nil {
			return fmt.Errorf("cluster %s: %w", c.Name, err)
		}
	}
	return nil
}

// promTime formats t as the API's Unix seconds with milliseconds.
func promTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1e3, 'f', 3, 64)
}

// promGet fetches one answer of the API at path (/api/v1/query_range,
// /api/v1/query) within promQueryTimeout and the run's deadline, its body
// capped at maxInputBytes. A refusal is a usage error naming what
// Prometheus said (a bad --match) or what the URL is not.
func promGet(ctx context.Context, cl *http.Client, base, path string, q url.Values) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, promQueryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path+"?"+q.Encode(), nil)
	if err != nil {
		return nil, usagef("--prometheus %q: %v", base, err)
	}
	resp, err := cl.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // not the whole query again
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %s (or the run's %s)", promQueryTimeout, promDeadline)
		}
		return nil, usagef("querying Prometheus at %s: %v (is --prometheus its base URL, reachable from here?)", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Status    string `json:"status"`
			ErrorType string `json:"errorType"`
			Error     string `json:"error"`
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(b, &e) == nil && e.Status == "error" {
			return nil, usagef("Prometheus refused the query (%s: %q): check --match", e.ErrorType, e.Error)
		}
		return nil, usagef("%s answered HTTP %s: not a Prometheus HTTP API; give Prometheus' base URL, e.g. http://prometheus:9090", base, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxInputBytes+1))
	if err != nil {
		return nil, usagef("reading Prometheus' answer: %v (a slow Prometheus: narrow --match or the window)", err)
	}
	if len(b) > maxInputBytes {
		return nil, usagef("Prometheus' answer is over %d MiB: narrow --match (e.g. '{cluster=\"a\"}') or run per cluster", maxInputBytes>>20)
	}
	return b, nil
}
