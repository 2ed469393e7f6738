package pipeline

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/etcdinfo"
)

// The model's inputs are etcd's own /metrics of every member: a scrape
// at the start of the run, one at its end (within finishTimeout, for the
// 2 s exit), and, every modelScrapeEvery between them, one whose latest
// answer per member stands in for a member the end scrape missed.

// metricsURL is a member's /metrics, on its client URL (etcd serves
// them there).
type metricsURL struct {
	id  uint64
	url string
}

// metricsURLs lists every member's /metrics URL (the member list, within
// 10 s); nil without members.
func metricsURLs(ctx context.Context, members []etcdmetric.Member, cl *etcdinfo.Cluster) ([]metricsURL, error) {
	if cl == nil || len(members) == 0 {
		return nil, nil
	}
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ml, err := cl.Client.MemberList(mctx)
	if err != nil {
		return nil, fmt.Errorf("member list: %w", err)
	}
	var out []metricsURL
	for _, m := range ml.Members {
		if len(m.ClientURLs) > 0 {
			out = append(out, metricsURL{m.ID, strings.TrimSuffix(m.ClientURLs[0], "/") + "/metrics"})
		}
	}
	return out, nil
}

// maxScrapes bounds the members' /metrics asked at once.
const maxScrapes = 8

// modelScrapeEvery is how often a run scrapes every member's /metrics
// for the model (CommitOptions.ModelScrapeEvery 0), each scrape within
// it; only the latest answer per member is kept.
const modelScrapeEvery = 5 * time.Second

// scrape is one member's /metrics and when its answer was read.
type scrape struct {
	fams map[string]*dto.MetricFamily
	at   time.Time
}

// scrapeAll scrapes every member's /metrics, keyed by member id, all at
// once (at most maxScrapes), each within ctx and 10 s: one member that
// does not answer (down, its packets dropped) must not eat another's
// time. The end scrape has 1 s (finishTimeout); asked one after the
// other, a member down first left none for the rest (VM stretched
// scenario, m2 down: "too few followers answered"; under TCG a slow
// member list and first scrape left none for any: no model). errs holds
// why each member that did not answer did not.
func scrapeAll(ctx context.Context, urls []metricsURL, tlsCfg *tls.Config) (got map[uint64]scrape, errs map[uint64]error) {
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out := make([]scrape, len(urls))
	errAt := make([]error, len(urls))
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxScrapes)
	for i, u := range urls {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i].fams, errAt[i] = etcdinfo.Families(mctx, u.url, tlsCfg)
			out[i].at = time.Now()
		})
	}
	wg.Wait()
	got, errs = map[uint64]scrape{}, map[uint64]error{}
	for i, u := range urls {
		if errAt[i] != nil {
			errs[u.id] = errAt[i]
			continue
		}
		got[u.id] = out[i]
	}
	return got, errs
}

// oneErr is the error of the lowest member id in errs; nil if none.
func oneErr(errs map[uint64]error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[slices.Min(slices.Collect(maps.Keys(errs)))]
}

// duringScrapes keeps, per member, the latest /metrics scrape that
// answered during the run: memory is one scrape per member whatever the
// run's length (two while a newer one replaces it), each within
// etcdinfo.MaxScrapeBytes. Read latest once run has returned.
type duringScrapes struct {
	latest map[uint64]scrape
}

// run scrapes every member every `every` (each scrape within it, at most
// maxScrapes at once: scrapeAll) until ctx ends; a scrape in flight then
// is abandoned at once (its requests carry ctx).
func (d *duringScrapes) run(ctx context.Context, urls []metricsURL, every time.Duration, tlsCfg *tls.Config) {
	d.latest = map[uint64]scrape{}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, every)
		got, _ := scrapeAll(sctx, urls, tlsCfg)
		cancel()
		if ctx.Err() != nil {
			return
		}
		for id, sc := range got {
			d.latest[id] = sc
		}
	}
}

// modelEnds picks, for every member of urls, the scrape its part of the
// model ends on: the end scrape if it answered, else the member's latest
// from during the run. It returns those scrapes' families by member (for
// modelInput) and, per member in id order, which one it is and its
// window (from the member's own start scrape; endAt: when the end scrape
// was asked).
func modelEnds(urls []metricsURL, start, end, during map[uint64]scrape, endErrs map[uint64]error, endAt time.Time) (map[uint64]map[string]*dto.MetricFamily, []commit.ModelScrape) {
	fams := map[uint64]map[string]*dto.MetricFamily{}
	var used []commit.ModelScrape
	byID := slices.SortedFunc(slices.Values(urls), func(a, b metricsURL) int { return cmp.Compare(a.id, b.id) })
	for _, u := range byID {
		ms := commit.ModelScrape{Member: strconv.FormatUint(u.id, 16), Scrape: commit.ScrapeNone}
		if err := endErrs[u.id]; err != nil {
			ms.EndErr = err.Error()
		}
		sc, ok := end[u.id]
		if ok {
			ms.Scrape = commit.ScrapeEnd
		} else if sc, ok = during[u.id]; ok {
			ms.Scrape, ms.ShortNs = commit.ScrapeDuring, max(int64(endAt.Sub(sc.at)), 0)
		}
		if ok {
			fams[u.id] = sc.fams
			if st, started := start[u.id]; started {
				ms.WindowNs = int64(sc.at.Sub(st.at))
			} else {
				ms.NoStart = true
			}
		}
		used = append(used, ms)
	}
	return fams, used
}
