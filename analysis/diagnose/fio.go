package diagnose

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/etcdscope/etcdscope/analysis/jsonl"
)

// FioRun is one fio job's fdatasync latency, from its JSON or its text.
type FioRun struct {
	Source  string `json:"source"`
	Job     string `json:"job"`
	Version string `json:"fio_version,omitempty"`
	// Options the etcd check depends on, as given ("" when the output
	// does not say): rw, ioengine, fdatasync, bs.
	Options map[string]string `json:"options,omitempty"`
	// HasSync: the output has a sync (fsync/fdatasync) section; without
	// it the run did not sync after its writes and says nothing about
	// what etcd's WAL waits for.
	HasSync bool `json:"has_sync"`
	// SyncCount: syncs made (JSON lat_ns.N, 0 when unknown).
	SyncCount float64 `json:"sync_count,omitempty"`
	// SyncMin, SyncMax, SyncMean: of the sync latency.
	SyncMin  time.Duration `json:"sync_min_ns,omitempty"`
	SyncMax  time.Duration `json:"sync_max_ns,omitempty"`
	SyncMean time.Duration `json:"sync_mean_ns,omitempty"`
	// Percentiles: sync latency by percentile (50, 99, 99.9, …),
	// ascending, as fio prints them (fio's own histogram, ±1.6% bins).
	Percentiles []FioPercentile `json:"percentiles,omitempty"`
	// WriteP99: the write (clat) p99, for runs without a sync section.
	WriteP99 time.Duration `json:"write_p99_ns,omitempty"`
	// Interrupted: fio said "terminating on signal" (a Ctrl-C): the
	// numbers cover less than the job's runtime or size.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Synced reports whether the job's options (its command line or its JSON
// job options) ask for a sync after writes: fsync=N or fdatasync=N with
// N > 0.
func (r FioRun) Synced() bool { return r.SyncOption() != "" }

// SyncOption is the option that makes the job sync ("fdatasync=1"), or ""
// when none does.
func (r FioRun) SyncOption() string {
	for _, k := range []string{"fdatasync", "fsync"} {
		if n, err := strconv.Atoi(r.Options[k]); err == nil && n > 0 {
			return k + "=" + r.Options[k]
		}
	}
	return ""
}

// FioPercentile is one of fio's percentiles of sync latency.
type FioPercentile struct {
	Pct     float64       `json:"pct"`
	Latency time.Duration `json:"latency_ns"`
}

// P returns the percentile pct (e.g. 99) and whether fio printed it.
func (f FioRun) P(pct float64) (time.Duration, bool) {
	for _, p := range f.Percentiles {
		if abs(p.Pct-pct) < 1e-6 {
			return p.Latency, true
		}
	}
	return 0, false
}

func percentiles(m map[float64]time.Duration) []FioPercentile {
	var out []FioPercentile
	for p, v := range m {
		out = append(out, FioPercentile{p, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pct < out[j].Pct })
	return out
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

type fioJSON struct {
	Version string            `json:"fio version"`
	Global  map[string]string `json:"global options"`
	Jobs    []struct {
		Name    string            `json:"jobname"`
		Options map[string]string `json:"job options"`
		Write   struct {
			ClatNs fioLat `json:"clat_ns"`
		} `json:"write"`
		Sync *struct {
			LatNs fioLat `json:"lat_ns"`
		} `json:"sync"`
	} `json:"jobs"`
}

type fioLat struct {
	Min, Max, Mean float64
	N              float64            `json:"N"`
	Percentile     map[string]float64 `json:"percentile"`
}

// ReadFioJSON reads fio --output-format=json (text before the object,
// such as fio's warnings, is skipped).
func ReadFioJSON(in Input) ([]FioRun, error) {
	i := bytes.IndexByte(in.Data, '{')
	if i < 0 {
		return nil, fmt.Errorf("no JSON object")
	}
	if jsonl.TooManyObjects(in.Data, MaxJSONObjects) {
		return nil, ErrTooManyObjects
	}
	var j fioJSON
	if err := json.NewDecoder(bytes.NewReader(in.Data[i:])).Decode(&j); err != nil {
		return nil, fmt.Errorf("reading fio JSON: %w", err)
	}
	stopped := bytes.Contains(in.Data, []byte("fio: terminating on signal"))
	// numjobs=N without group_reporting prints one entry per clone, all
	// with the job's name: number them so their findings can be told apart.
	clones, seen := map[string]int{}, map[string]int{}
	for _, job := range j.Jobs {
		clones[strings.TrimSpace(job.Name)]++
	}
	var out []FioRun
	for _, job := range j.Jobs {
		name := strings.TrimSpace(job.Name)
		if n := clones[name]; n > 1 {
			seen[name]++
			name += " [" + strconv.Itoa(seen[name]) + "/" + strconv.Itoa(n) + "]"
		}
		r := FioRun{Source: in.Name, Job: name, Version: j.Version, Options: map[string]string{}, Interrupted: stopped}
		for _, o := range []map[string]string{j.Global, job.Options} {
			keepCheckOptions(r.Options, o)
		}
		if job.Sync != nil && job.Sync.LatNs.N > 0 {
			l := job.Sync.LatNs
			r.HasSync, r.SyncCount = true, l.N
			r.SyncMin, r.SyncMax, r.SyncMean = time.Duration(l.Min), time.Duration(l.Max), time.Duration(l.Mean)
			m := map[float64]time.Duration{}
			for k, v := range l.Percentile {
				if p, err := strconv.ParseFloat(k, 64); err == nil {
					m[p] = time.Duration(v)
				}
			}
			r.Percentiles = percentiles(m)
		} else if v, ok := job.Write.ClatNs.Percentile["99.000000"]; ok {
			r.WriteP99 = time.Duration(v)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("fio JSON without jobs")
	}
	return out, nil
}

var (
	fioJobRe     = regexp.MustCompile(`(?m)^(\S+): \(groupid=\d+, jobs=\d+\)`)
	fioVerRe     = regexp.MustCompile(`(?m)^(fio-\d[\w.-]*)`)
	fioHdrRe     = regexp.MustCompile(`(?m)^\S+: \(g=\d+\): rw=(\w+), bs=\(R\) (\w+)-.*ioengine=(\w+)`)
	fioCmdRe     = regexp.MustCompile(`--(fdatasync|fsync|bs|rw|ioengine)=(\S+)`)
	fioSyncRe    = regexp.MustCompile(`sync \((n|u|m)sec\): min=\s*([0-9.]+[kKmM]?), max=\s*([0-9.]+[kKmM]?), avg=\s*([0-9.]+)`)
	fioSyncPctRe = regexp.MustCompile(`sync percentiles \((n|u|m)sec\):`)
	fioClatPctRe = regexp.MustCompile(`clat percentiles \((n|u|m)sec\):`)
	fioPctRe     = regexp.MustCompile(`([0-9.]+)th=\[\s*([0-9.]+[kKmM]?)\]`)
	// etcdPerfP99Re: the summary line of OpenShift's etcd-perf image
	// (quay.io/openshift-scale/etcd-perf), printed after fio's JSON,
	// which users paste with the JSON elided.
	etcdPerfP99Re = regexp.MustCompile(`99th percentile of fsync is (\d+) ns`)
	fioVersionRe  = regexp.MustCompile(`"fio version"\s*:\s*"(fio-[^"]+)"`)
	// fioErrRe: fio's own messages ("fio: failed parsing ...").
	fioErrRe = regexp.MustCompile(`(?m)^fio: .*$`)
)

// ReadFioText reads fio's human output: the "sync (usec): min=…" line
// and the "sync percentiles (usec|msec|nsec)" block under
// fsync/fdatasync/sync_file_range, in whichever unit fio chose.
func ReadFioText(in Input) ([]FioRun, error) {
	s := strings.ReplaceAll(string(in.Data), "\r", "")
	r := FioRun{Source: in.Name, Options: map[string]string{}, Interrupted: strings.Contains(s, "fio: terminating on signal")}
	if m := fioJobRe.FindStringSubmatch(s); m != nil {
		r.Job = m[1]
	}
	if m := fioVerRe.FindStringSubmatch(s); m != nil {
		r.Version = m[1]
	}
	if m := fioHdrRe.FindStringSubmatch(s); m != nil {
		r.Options["rw"], r.Options["bs"], r.Options["ioengine"] = m[1], m[2], m[3]
	}
	for _, m := range fioCmdRe.FindAllStringSubmatch(s, -1) {
		r.Options[m[1]] = m[2]
	}
	if m := fioSyncRe.FindStringSubmatch(s); m != nil {
		u := fioUnit(m[1])
		r.HasSync = true
		r.SyncMin = scaled(m[2], u)
		r.SyncMax = scaled(m[3], u)
		r.SyncMean = scaled(m[4], u)
	}
	if loc := fioSyncPctRe.FindStringSubmatchIndex(s); loc != nil {
		r.HasSync = true
		r.Percentiles = percentiles(readPctBlock(s[loc[1]:], fioUnit(s[loc[2]:loc[3]])))
	} else if loc := fioClatPctRe.FindStringSubmatchIndex(s); loc != nil {
		p := readPctBlock(s[loc[1]:], fioUnit(s[loc[2]:loc[3]]))
		r.WriteP99 = p[99]
	}
	if m := etcdPerfP99Re.FindStringSubmatch(s); m != nil && len(r.Percentiles) == 0 {
		// fio's JSON pasted with "..." for most of it: the summary
		// line is the p99 of fio's own sync percentiles (ns); the
		// global options object usually survives the elision whole.
		n, _ := strconv.ParseInt(m[1], 10, 64)
		r.HasSync = true
		r.Percentiles = []FioPercentile{{99, time.Duration(n)}}
		readElidedFioJSON(s, &r)
	}
	if !r.HasSync && r.WriteP99 == 0 {
		if m := fioErrRe.FindAllString(s, 3); m != nil && !strings.Contains(s, `"fio version"`) {
			// fio's own complaints and no result: the job never ran.
			return nil, &FioNoJobError{Complaints: m}
		}
		if strings.Contains(s, `"fio version"`) {
			return nil, fmt.Errorf("fio JSON that does not decode (cut or elided with \"...\"?) and shows no sync percentiles: paste fio's whole --output-format=json output")
		}
		return nil, fmt.Errorf("fio text without sync or clat percentiles")
	}
	return []FioRun{r}, nil
}

// FioNoJobError is ReadFioText's error for fio output that holds fio's
// own complaints ("fio: failed parsing ...", at most three) and no
// result: the job never ran. Unread.Quoted carries the complaints, which
// render prints each on a line of its own.
type FioNoJobError struct {
	Complaints []string
}

// Error leads with the count and the fix; the complaints are the
// sinks' to quote.
func (e *FioNoJobError) Error() string {
	return fmt.Errorf("fio ran no job (%d of fio's own errors): fix the job file or command line and rerun", len(e.Complaints)).Error()
}

// readElidedFioJSON takes the version and the "global options" object
// from fio JSON whose whole does not decode (parts elided by hand): the
// object is decoded alone when it is intact, and ignored when not.
func readElidedFioJSON(s string, r *FioRun) {
	if m := fioVersionRe.FindStringSubmatch(s); m != nil && r.Version == "" {
		r.Version = m[1]
	}
	i := strings.Index(s, `"global options"`)
	if i < 0 {
		return
	}
	j := strings.IndexByte(s[i:], '{')
	if j < 0 {
		return
	}
	var opts map[string]string
	if json.NewDecoder(strings.NewReader(s[i+j:])).Decode(&opts) != nil {
		return
	}
	keepCheckOptions(r.Options, opts)
}

// keepCheckOptions copies into dst the fio options the etcd check
// depends on (FioRun.Options), a later map overriding an earlier one.
func keepCheckOptions(dst, src map[string]string) {
	for k, v := range src {
		switch k {
		case "rw", "readwrite", "ioengine", "fdatasync", "fsync", "bs", "blocksize":
			dst[k] = v
		}
	}
}

// readPctBlock reads the "| 1.00th=[ 553], ..." lines after a header.
func readPctBlock(s string, unit time.Duration) map[float64]time.Duration {
	out := map[float64]time.Duration{}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if i > 0 && !strings.HasPrefix(t, "|") {
			break
		}
		for _, m := range fioPctRe.FindAllStringSubmatch(t, -1) {
			p, err := strconv.ParseFloat(m[1], 64)
			if err == nil {
				out[p] = scaled(m[2], unit)
			}
		}
	}
	return out
}

func fioUnit(u string) time.Duration {
	switch u {
	case "n":
		return time.Nanosecond
	case "m":
		return time.Millisecond
	}
	return time.Microsecond
}

// scaled reads fio's number with its optional k/m suffix (fio prints
// "15k" for 15000 in narrow columns).
func scaled(s string, unit time.Duration) time.Duration {
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k") || strings.HasSuffix(s, "K"):
		mult, s = 1e3, s[:len(s)-1]
	case strings.HasSuffix(s, "m") || strings.HasSuffix(s, "M"):
		mult, s = 1e6, s[:len(s)-1]
	}
	f, _ := strconv.ParseFloat(s, 64)
	return time.Duration(f * mult * float64(unit))
}
