package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/internal/testenv"
)

// promQuery runs an instant query against Prometheus' HTTP API and returns
// the value of its only sample (ok false when the result is empty).
func promQuery(t *testing.T, base, q string) (v float64, ok bool) {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	if r.Status != "success" {
		t.Fatalf("query %s: %s", q, r.Error)
	}
	if len(r.Data.Result) == 0 {
		return 0, false
	}
	if len(r.Data.Result) > 1 {
		t.Fatalf("query %s: %d samples, want 1", q, len(r.Data.Result))
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	v, err = strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("query %s: value %q: %v", q, s, err)
	}
	return v, true
}

// startPrometheus starts Debian's prometheus (path prom) with the config
// text cfg, on 127.0.0.1 with its data in a temp directory, stopped at
// cleanup. It returns the API's base URL and the server's log so far.
func startPrometheus(t *testing.T, prom, cfg string) (base string, log func() string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	pc := exec.CommandContext(ctx, prom, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+listen)
	var plog testenv.SyncBuffer
	pc.Stdout, pc.Stderr = &plog, &plog // one writer: exec then calls Write from one goroutine at a time
	if err := pc.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); pc.Wait() })
	return "http://" + listen, plog.String
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestPrometheusScrapesServe is the real-component test: a real Prometheus
// server (Debian's prometheus package) scrapes `etcdscope serve` every
// second while fio's etcd job runs (a short warm-up run, then the main
// one). Then, in PromQL: the main run's fsync p99 from the classic buckets
// (histogram_quantile over rate()) answers and lies within one bucket (a
// factor of 2) of fio's own p99, and the histogram's _count equals the
// fdatasync count fio reports for both runs. Everything listens on 127.0.0.1, in temp
// directories; the test takes about 15 s.
func TestPrometheusScrapesServe(t *testing.T) {
	testenv.RequireRoot(t)
	fio := testenv.LookPath(t, "fio", "fio")
	prom := testenv.LookPath(t, "prometheus", "prometheus")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// fio runs under a comm of its own (the name of a symlink to it: exec
	// takes comm from the path's last element), so that fio jobs that other
	// tests run on this host at the same time are not counted.
	dir := t.TempDir()
	const comm = "fio-etcdscope"
	if err := os.Symlink(fio, filepath.Join(dir, comm)); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "--comm", comm)
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: etcdscope
    static_configs:
      - targets: [%q]
`, s.addr)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	var promLog bytes.Buffer
	pc := exec.CommandContext(ctx, prom, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+base[len("http://"):])
	pc.Stdout, pc.Stderr = &promLog, &promLog
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { pc.Process.Kill(); pc.Wait() }()
	waitFor := func(what string, d time.Duration, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v; prometheus log:\n%s", what, d, promLog.String())
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	waitFor("prometheus ready", 20*time.Second, func() bool {
		r, err := http.Get(base + "/-/ready")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusOK
	})
	waitFor("target up", 10*time.Second, func() bool {
		v, ok := promQuery(t, base, `up{job="etcdscope"}`)
		return ok && v == 1
	})

	fioDir, err := os.MkdirTemp("/var/tmp", "etcdscope-prom-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(fioDir)
	// runFio runs fio's etcd job (2300-byte writes, fdatasync after each)
	// and returns fio's count of fdatasync calls and its p99, seconds.
	runFio := func(size string) (int64, float64) {
		out, err := exec.CommandContext(ctx, filepath.Join(dir, comm), "--name=etcd", "--directory="+fioDir, "--rw=write", "--ioengine=sync",
			"--fdatasync=1", "--bs=2300", "--size="+size, "--output-format=json").Output()
		if err != nil {
			t.Fatalf("fio: %v\n%s", err, out)
		}
		var res fioResult
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("fio JSON: %v", err)
		}
		n := res.Jobs[0].Sync.TotalIOs
		if n == 0 { // fio 3.33 leaves total_ios at 0 for fdatasync
			n = res.Jobs[0].Sync.Lat.N
		}
		p99 := res.Jobs[0].Sync.Lat.Percentile["99.000000"] / 1e9
		if n == 0 || p99 == 0 {
			t.Fatalf("fio JSON has no sync count or p99: %s", out)
		}
		return n, p99
	}
	countQ := `sum(etcdscope_fsync_duration_seconds_count{job="etcdscope", comm="` + comm + `", syscall="fdatasync"})`

	// A short warm-up run first: a histogram series appears at its first
	// observation, and rate() cannot count what happened before its first
	// sample. With the series scraped before the main run, rate() over a
	// window that starts before it sees exactly the main run's calls.
	warmCount, _ := runFio("64k")
	waitFor("warm-up count scraped", 10*time.Second, func() bool {
		v, ok := promQuery(t, base, countQ)
		return ok && v >= float64(warmCount)
	})
	time.Sleep(2 * time.Second) // two more samples before the main run
	start := time.Now()
	mainCount, fioP99 := runFio("4m")
	fioTime := time.Since(start)
	fioCount := warmCount + mainCount

	var promCount float64
	waitFor("scraped count reaching fio's", 15*time.Second, func() bool {
		v, ok := promQuery(t, base, countQ)
		promCount = v
		return ok && v >= float64(fioCount)
	})
	// One more scrape: the count must not go past fio's either.
	time.Sleep(2 * time.Second)
	promCount, _ = promQuery(t, base, countQ)
	if promCount != float64(fioCount) {
		t.Errorf("Prometheus has %v fdatasync calls, fio made %d", promCount, fioCount)
	}
	// From a second before the main run (a sample of the warm-up's count
	// is there) to now.
	window := int(math.Ceil(time.Since(start).Seconds())) + 1
	p99Q := fmt.Sprintf(`histogram_quantile(0.99, sum by (le) (rate(etcdscope_fsync_duration_seconds_bucket{job="etcdscope", comm=%q, syscall="fdatasync"}[%ds])))`, comm, window)
	p99, ok := promQuery(t, base, p99Q)
	if !ok || math.IsNaN(p99) || p99 <= 0 {
		t.Fatalf("%s: no answer (%v, %v)", p99Q, p99, ok)
	}
	t.Logf("fio: %d+%d fdatasync (main run %v, p99 %.1f µs); Prometheus: count %v, main run p99 from classic buckets %.1f µs",
		warmCount, mainCount, fioTime.Round(time.Millisecond), fioP99*1e6, promCount, p99*1e6)
	// histogram_quantile interpolates inside a bucket whose bounds differ
	// by a factor of ~2: it can be off by up to that factor, no more.
	if p99 < fioP99/2 || p99 > fioP99*2 {
		t.Errorf("PromQL p99 %.1f µs is more than one bucket (2x) from fio's p99 %.1f µs", p99*1e6, fioP99*1e6)
	}
}
