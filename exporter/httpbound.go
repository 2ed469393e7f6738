package exporter

import (
	"bytes"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
)

// The server's bounds: any process on the node (or the network, with
// --listen-public) can connect, so none of connections, time or memory
// may grow with what a client does.
const (
	// MaxConns caps open connections. At the cap a new connection takes
	// the place of the oldest one that has not sent a request yet (or is
	// idle between requests); only when every connection is busy in a
	// request is the new one closed. Idle connections cannot lock out a
	// scraper this way.
	MaxConns = 256
	// ScrapeCacheTTL: a /metrics page is gathered at most once per this
	// long per format (text, protobuf, OpenMetrics; compressed or not);
	// scrapers within it get the same bytes. Prometheus scrapes every
	// 15 s or more, so no one sees the difference, and 200 concurrent
	// scrapers cost one gather a second instead of 200.
	ScrapeCacheTTL = time.Second

	// The http.Server timeouts: a connection that sends no request header
	// within ReadHeaderTimeout is closed, so is one idle for IdleTimeout.
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	WriteTimeout      = 30 * time.Second
	IdleTimeout       = 60 * time.Second
	MaxHeaderBytes    = 16 << 10
)

// newServer returns the http.Server for h on ln, with the timeouts above,
// and the listener to Serve: ln with MaxConns enforced.
func newServer(h http.Handler, ln net.Listener) (*http.Server, net.Listener) {
	cl := &connLimiter{Listener: ln, max: MaxConns, conns: map[net.Conn]*connEntry{}}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ConnState:         cl.state,
	}
	return srv, cl
}

// connEntry is one open connection as the limiter sees it.
type connEntry struct {
	busy  bool // in a request (http.StateActive)
	since time.Time
}

// connLimiter is a net.Listener that keeps at most max connections open
// (see MaxConns); http.Server.ConnState tells it which are busy.
type connLimiter struct {
	net.Listener
	max   int
	mu    sync.Mutex
	conns map[net.Conn]*connEntry
}

// Accept accepts the next connection and, at the cap, closes the oldest
// one not in a request, or the new one if all are.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if len(l.conns) >= l.max {
			var victim net.Conn
			var vt time.Time
			for oc, e := range l.conns {
				if !e.busy && (victim == nil || e.since.Before(vt)) {
					victim, vt = oc, e.since
				}
			}
			if victim == nil {
				l.mu.Unlock()
				c.Close() // every connection is in a request: shed this one
				continue
			}
			delete(l.conns, victim)
			victim.Close()
		}
		l.conns[c] = &connEntry{since: time.Now()}
		l.mu.Unlock()
		return c, nil
	}
}

// state is the http.Server's ConnState hook.
func (l *connLimiter) state(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.conns[c]
	switch s {
	case http.StateClosed, http.StateHijacked:
		delete(l.conns, c)
	case http.StateActive, http.StateIdle:
		if e != nil {
			e.busy = s == http.StateActive
			e.since = time.Now()
		}
	}
}

// onlyGetHead answers 405 Method Not Allowed to every method but GET and
// HEAD: nothing the exporter serves changes with a request.
func onlyGetHead(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed: use GET", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// scrapeCache serves h's answers from a cache of ScrapeCacheTTL, keyed by
// the negotiated format and compression (a handful of keys, whatever
// clients send).
type scrapeCache struct {
	h       http.Handler
	ttl     time.Duration
	mu      sync.Mutex // held while filling: one gather at a time, concurrent misses wait for it
	entries map[string]*cachedPage
}

type cachedPage struct {
	at     time.Time
	status int
	header http.Header
	body   []byte
}

// pageRecorder is the http.ResponseWriter a cache fill writes into.
type pageRecorder struct {
	header http.Header
	status int
	buf    bytes.Buffer
}

func (p *pageRecorder) Header() http.Header { return p.header }
func (p *pageRecorder) WriteHeader(code int) {
	if p.status == 0 {
		p.status = code
	}
}
func (p *pageRecorder) Write(b []byte) (int, error) {
	if p.status == 0 {
		p.status = http.StatusOK
	}
	return p.buf.Write(b)
}

func cacheScrapes(h http.Handler, ttl time.Duration) http.Handler {
	return &scrapeCache{h: h, ttl: ttl, entries: map[string]*cachedPage{}}
}

func (c *scrapeCache) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	format := expfmt.NegotiateIncludingOpenMetrics(r.Header)
	gzip := strings.Contains(r.Header.Get("Accept-Encoding"), "gzip")
	key := string(format)
	if gzip {
		key += "|gzip"
	}
	c.mu.Lock()
	p := c.entries[key]
	if p == nil || time.Since(p.at) > c.ttl {
		// Only what decides the answer goes to the handler.
		req := r.Clone(r.Context())
		req.Header = http.Header{}
		req.Header.Set("Accept", r.Header.Get("Accept"))
		if gzip {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		rec := &pageRecorder{header: http.Header{}}
		c.h.ServeHTTP(rec, req)
		p = &cachedPage{at: time.Now(), status: rec.status, header: rec.header, body: rec.buf.Bytes()}
		if p.status == http.StatusOK {
			c.entries[key] = p
		}
	}
	c.mu.Unlock()
	for k, v := range p.header {
		w.Header()[k] = v
	}
	if p.status == 0 {
		p.status = http.StatusOK
	}
	w.WriteHeader(p.status)
	if r.Method != http.MethodHead {
		w.Write(p.body)
	}
}
