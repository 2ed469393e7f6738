// Package etcdtest starts real etcd clusters for tests: the server built by
// `make etcd` (bin/etcd, v3.6.16 pinned in tools/etcd/go.mod), one or three
// members on loopback addresses, optionally with TLS certificates the
// harness makes, plus the client, metrics and load helpers the tracer tests
// check etcdscope's numbers against.
//
// Every member listens on fixed ports of its own IP: clients on :2379,
// peers on :2380 (the port etcdscope peers traces), plain-HTTP metrics and
// /health on :2381. Fixed ports mean two clusters cannot run at once in one
// network namespace, and `go test ./...` runs packages in parallel, so
// Start holds the port lock from start to cleanup: clusters of different
// test binaries queue instead of colliding. The lock is an abstract Unix
// socket (portLockName), which belongs to the network namespace as the
// ports do, held together with an exclusive flock on
// $TMPDIR/etcdscope-etcdtest.lock, which trees older than the socket take:
// the file alone let a run under another /tmp (scripts/fresh-root.sh's
// root, another TMPDIR) start a cluster on the ports another run held
// (2026-12-07: "bind: address already in use" for 127.0.0.2:2380).
package etcdtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdscope/etcdscope/internal/testenv"
)

// Ports every member uses on its own IP.
const (
	ClientPort  = 2379 // gRPC and HTTP client API
	PeerPort    = 2380 // Raft and the /raft/probing prober
	MetricsPort = 2381 // plain HTTP /metrics and /health (--listen-metrics-urls)
)

// Timeouts of the harness. healthTimeout covers process start, TLS set-up
// and the first election (etcd's default election timeout is 1 s).
const (
	healthTimeout = 30 * time.Second
	statusTimeout = 20 * time.Second // per member, after /health said true
	stopTimeout   = 10 * time.Second
	lockTimeout   = 10 * time.Minute
)

// Options describes the cluster Start makes. The zero value is one plain
// member on 127.0.0.1.
type Options struct {
	Members   int      // 1 or 3 (0 means 1; any count up to len(IPs) works)
	IPs       []string // default 127.0.0.1, 127.0.0.2, 127.0.0.3; member i uses IPs[i]
	PeerTLS   bool     // https peer URLs on IP:2380 with certs made by the harness
	ClientTLS bool     // https client URLs on IP:2379
	// DataDir is the base of the members' data dirs; default t.TempDir().
	// Tests may pass a dir on a loop fs: register its unmount before Start,
	// so that Start's cleanup (stopping the members) runs first.
	DataDir   string
	ExtraArgs []string // appended to every member's command line (later flags win)
	// NetNS, when set, names a network namespace per member (`ip netns
	// add NAME`): member i runs as `ip netns exec NetNS[i] etcd ...`, which
	// execs etcd in place, so Member.PID is etcd's. IPs[i] must be an
	// address of that namespace the test process can reach (the scenarios
	// route the root namespace to every member).
	NetNS []string
	// AdvertisePeer, when AdvertisePeer[i] is set, is the peer URL member
	// i advertises (and the initial cluster names) instead of the one it
	// listens on: a test puts a proxy there, in front of PeerURL.
	AdvertisePeer []string
	// Binary, when set, is the etcd executable instead of
	// testenv.EtcdBinary's: a copy under another name gives the members a
	// comm of the test's own (serve --commit-comm finds them alone).
	Binary string
	// HealthTimeout bounds the wait for every member's /health; 0 is 30 s.
	// The VM rig's scenarios raise it: on a loaded host the emulated guest
	// took more than 30 s to start three members.
	HealthTimeout time.Duration
}

// Member is one running etcd process.
type Member struct {
	Name, IP  string // Name is m1, m2, ... (Members[i] is m<i+1>, as the scenarios count): etcd's --name
	ClientURL string // scheme://IP:2379
	PeerURL   string // scheme://IP:2380, where it listens
	// AdvertisedPeerURL is the peer URL the others dial: PeerURL, or
	// Options.AdvertisePeer's.
	AdvertisedPeerURL string
	MetricsURL        string // plain http://IP:2381/metrics, never TLS
	DataDir           string // etcd's --data-dir: <Options.DataDir>/<Name>; WAL under member/wal
	PID               int    // the etcd process: what tracer tests filter on
	ID                uint64 // Raft member ID (the To label of peer metrics, in hex)

	logFile string // the process's stdout+stderr (etcd's zap JSON log)
	exe     string // what start ran, for Restart
	args    []string
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has been waited for
	waitErr error         // cmd.Wait's result, valid after exited closes
}

// Cluster is a running etcd cluster; Start registers its teardown with
// t.Cleanup.
type Cluster struct {
	Members []*Member
	// PEM files made with crypto/x509: an ECDSA P-256 CA and a leaf for the
	// test's client that is valid for server and client auth ("" if neither
	// PeerTLS nor ClientTLS).
	CAFile, ClientCertFile, ClientKeyFile string

	clientTLS bool
	mu        sync.Mutex
	cli       *clientv3.Client // shared by Put and Leader, made on first use
}

// Start starts opt.Members etcd members from testenv.EtcdBinary(t) (which
// skips, or fails under ETCDSCOPE_REQUIRE_BPF=1, when there is no binary),
// waits until every member's /health reports true and every member knows
// its Raft ID, and registers a cleanup that stops all members (SIGTERM, then
// SIGKILL after 10 s) and waits for them, also when the test fails. A
// member that exits or stays unhealthy for 30 s fails the test with the
// tail of its log.
func Start(t testing.TB, opt Options) *Cluster {
	t.Helper()
	bin := opt.Binary
	if bin == "" {
		bin = testenv.EtcdBinary(t)
	}
	if opt.Members == 0 {
		opt.Members = 1
	}
	if len(opt.IPs) == 0 {
		opt.IPs = []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	}
	if opt.Members < 1 || opt.Members > len(opt.IPs) {
		t.Fatalf("etcdtest: %d members need as many IPs, have %d", opt.Members, len(opt.IPs))
	}
	if opt.DataDir == "" {
		opt.DataDir = t.TempDir()
	}
	workDir := t.TempDir() // certificates and logs: never on the caller's DataDir

	unlock, err := lockPorts(lockTimeout, t.Logf)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	c := &Cluster{clientTLS: opt.ClientTLS}
	// Registered before any process starts, so a Start that fails halfway
	// still stops what it started; cleanups run last-in first-out, so the
	// lock is released after the processes are gone.
	t.Cleanup(unlock)
	t.Cleanup(func() { c.stop(t) })
	// A run that does not take this lock (a tree older than its socket,
	// under another /tmp) may still hold the ports: wait until they are.
	var here []string // members in this network namespace
	for i, ip := range opt.IPs[:opt.Members] {
		if i >= len(opt.NetNS) || opt.NetNS[i] == "" {
			here = append(here, ip)
		}
	}
	if err := waitPortsFree(here, lockTimeout, t.Logf); err != nil {
		t.Fatalf("etcdtest: %v", err)
	}

	peerScheme, clientScheme := "http", "http"
	if opt.PeerTLS {
		peerScheme = "https"
	}
	if opt.ClientTLS {
		clientScheme = "https"
	}
	var initial []string
	for i := 0; i < opt.Members; i++ {
		ip := opt.IPs[i]
		name := fmt.Sprintf("m%d", i+1)
		m := &Member{
			Name:       name,
			IP:         ip,
			ClientURL:  fmt.Sprintf("%s://%s", clientScheme, hostPort(ip, ClientPort)),
			PeerURL:    fmt.Sprintf("%s://%s", peerScheme, hostPort(ip, PeerPort)),
			MetricsURL: fmt.Sprintf("http://%s/metrics", hostPort(ip, MetricsPort)),
			DataDir:    filepath.Join(opt.DataDir, name),
			logFile:    filepath.Join(workDir, name+".log"),
			exited:     make(chan struct{}),
		}
		m.AdvertisedPeerURL = m.PeerURL
		if i < len(opt.AdvertisePeer) && opt.AdvertisePeer[i] != "" {
			m.AdvertisedPeerURL = opt.AdvertisePeer[i]
		}
		c.Members = append(c.Members, m)
		initial = append(initial, m.Name+"="+m.AdvertisedPeerURL)
	}

	var leafs []certPaths
	if opt.PeerTLS || opt.ClientTLS {
		if leafs, err = c.makeCerts(workDir); err != nil {
			t.Fatalf("etcdtest: %v", err)
		}
	}
	token := make([]byte, 8)
	rand.Read(token)
	for i, m := range c.Members {
		args := []string{
			"--name=" + m.Name,
			"--data-dir=" + m.DataDir,
			"--listen-client-urls=" + m.ClientURL,
			"--advertise-client-urls=" + m.ClientURL,
			"--listen-peer-urls=" + m.PeerURL,
			"--initial-advertise-peer-urls=" + m.AdvertisedPeerURL,
			"--listen-metrics-urls=http://" + hostPort(m.IP, MetricsPort),
			"--initial-cluster=" + strings.Join(initial, ","),
			"--initial-cluster-state=new",
			"--initial-cluster-token=etcdtest-" + hex.EncodeToString(token),
			"--logger=zap", "--log-outputs=stderr",
		}
		if opt.PeerTLS {
			args = append(args, "--peer-cert-file="+leafs[i].cert, "--peer-key-file="+leafs[i].key,
				"--peer-trusted-ca-file="+c.CAFile, "--peer-client-cert-auth")
		}
		if opt.ClientTLS {
			args = append(args, "--cert-file="+leafs[i].cert, "--key-file="+leafs[i].key,
				"--trusted-ca-file="+c.CAFile, "--client-cert-auth")
		}
		args = append(args, opt.ExtraArgs...)
		exe := bin
		if i < len(opt.NetNS) && opt.NetNS[i] != "" {
			ip := testenv.LookPath(t, "ip", "iproute2")
			exe, args = ip, append([]string{"netns", "exec", opt.NetNS[i], bin}, args...)
		}
		if err := m.start(exe, args); err != nil {
			t.Fatalf("etcdtest: starting %s: %v", m.Name, err)
		}
		t.Logf("etcdtest: started %s pid %d: client %s, peer %s, data %s", m.Name, m.PID, m.ClientURL, m.PeerURL, m.DataDir)
	}

	started := time.Now()
	if opt.HealthTimeout == 0 {
		opt.HealthTimeout = healthTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), opt.HealthTimeout)
	defer cancel()
	for _, m := range c.Members {
		if err := m.waitHealthy(ctx); err != nil {
			t.Fatalf("etcdtest: %s (pid %d) not healthy: %v\n--- tail of %s ---\n%s", m.Name, m.PID, err, m.logFile, m.logTail(4096))
		}
	}
	cli, err := c.client()
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	for _, m := range c.Members {
		// A fresh timeout: on a loaded host the health wait may have used
		// most of healthTimeout (seen in the VM rig at load average 12).
		sctx, scancel := context.WithTimeout(context.Background(), statusTimeout)
		st, err := cli.Status(sctx, m.ClientURL)
		scancel()
		if err != nil {
			t.Fatalf("etcdtest: status of %s: %v\n--- tail of %s ---\n%s", m.Name, err, m.logFile, m.logTail(4096))
		}
		m.ID = st.Header.MemberId
	}
	t.Logf("etcdtest: %d member(s) healthy after %v", len(c.Members), time.Since(started).Round(time.Millisecond))
	return c
}

// hostPort joins an IPv4 or IPv6 address and a port for a URL.
func hostPort(ip string, port int) string {
	if strings.Contains(ip, ":") {
		return fmt.Sprintf("[%s]:%d", ip, port)
	}
	return fmt.Sprintf("%s:%d", ip, port)
}

// makeCerts writes the CA, one leaf per member (IP SANs: the member's IP
// and 127.0.0.1) and the client leaf into dir, and returns the member leafs
// in member order.
func (c *Cluster) makeCerts(dir string) ([]certPaths, error) {
	ca, err := newCA(dir)
	if err != nil {
		return nil, err
	}
	c.CAFile = ca.file
	var leafs []certPaths
	for i, m := range c.Members {
		p, err := ca.leaf(dir, m.Name, int64(i+2), []string{m.IP, "127.0.0.1"})
		if err != nil {
			return nil, err
		}
		leafs = append(leafs, p)
	}
	client, err := ca.leaf(dir, "client", int64(len(c.Members)+2), []string{"127.0.0.1"})
	if err != nil {
		return nil, err
	}
	c.ClientCertFile, c.ClientKeyFile = client.cert, client.key
	return leafs, nil
}

// WALDir is the directory of the member's WAL segments (*.wal, fdatasync'd
// per Raft batch); the bbolt backend is DataDir/member/snap/db.
func (m *Member) WALDir() string { return filepath.Join(m.DataDir, "member", "wal") }

// LogFile is the path of the member's stdout and stderr: etcd's zap JSON
// log (its slow requests' traces among them). It is kept until the
// test's temporary directory is removed.
func (m *Member) LogFile() string { return m.logFile }

// start runs etcd with its output in m.logFile. Pdeathsig kills the member
// if the test binary dies without running its cleanups (a panic, a
// timeout), so no etcd outlives the test holding ports 2379-2381.
func (m *Member) start(bin string, args []string) error {
	if err := os.MkdirAll(m.DataDir, 0o700); err != nil {
		return err
	}
	// Appended to: a restarted member's log follows its first life's.
	log, err := os.OpenFile(m.logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close() // the child holds its own descriptor
	m.exe, m.args, m.exited = bin, args, make(chan struct{})
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	m.cmd, m.PID = cmd, cmd.Process.Pid
	go func() {
		m.waitErr = cmd.Wait()
		close(m.exited)
	}()
	return nil
}

// Stop stops the member as the cleanup would (SIGTERM, SIGKILL after
// 10 s) and waits for it; a test uses it to take a member down for a phase.
// The cluster's cleanup then has nothing left to do for it. Stopping a
// member that has exited already is a no-op.
func (m *Member) Stop() error {
	select {
	case <-m.exited:
		return nil
	default:
	}
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("stopping %s: %w", m.Name, err)
	}
	select {
	case <-m.exited:
	case <-time.After(stopTimeout):
		m.cmd.Process.Kill()
		<-m.exited
	}
	return nil
}

// Restart stops the member (as Stop) and starts it again on its data dir
// with the same command line (etcd ignores the initial-cluster flags of a
// member that has a WAL), as a supervisor restarting etcd would; it
// returns once the new process's /health reports true. PID is the new
// process's.
func (m *Member) Restart(ctx context.Context) error {
	if err := m.Stop(); err != nil {
		return err
	}
	if err := m.start(m.exe, m.args); err != nil {
		return fmt.Errorf("restarting %s: %w", m.Name, err)
	}
	if err := m.waitHealthy(ctx); err != nil {
		return fmt.Errorf("%s (pid %d) not healthy after its restart: %w\n--- tail of %s ---\n%s", m.Name, m.PID, err, m.logFile, m.logTail(4096))
	}
	return nil
}

// waitHealthy polls the member's /health every 100 ms until it reports
// {"health":"true"}, the process exits, or ctx ends.
func (m *Member) waitHealthy(ctx context.Context) error {
	url := strings.TrimSuffix(m.MetricsURL, "/metrics") + "/health"
	last := errors.New("no answer yet")
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := checkHealth(ctx, url); err == nil {
			return nil
		} else {
			last = err
		}
		select {
		case <-m.exited:
			return fmt.Errorf("etcd exited: %v", m.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("%w; last /health: %v", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

func checkHealth(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return err
	}
	var h struct{ Health, Reason string }
	if err := json.Unmarshal(body, &h); err != nil {
		return fmt.Errorf("%s: %s: %w", resp.Status, bytes.TrimSpace(body), err)
	}
	if h.Health != "true" {
		return fmt.Errorf("%s: health %q, reason %q", resp.Status, h.Health, h.Reason)
	}
	return nil
}

// logTail returns at most n bytes from the end of the member's log.
func (m *Member) logTail(n int64) string {
	f, err := os.Open(m.logFile)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// stop closes the shared client and stops every member: SIGTERM (etcd
// shuts down cleanly on it), SIGKILL after stopTimeout. Followers stop
// before the leader: a leader stopping together with its followers tries to
// hand leadership to a dying peer and waits out etcd's request timeout
// (measured: 6 s of a 3-member cleanup); with its followers already gone it
// skips the transfer. If the test failed it logs each member's log tail.
func (c *Cluster) stop(t testing.TB) {
	c.mu.Lock()
	if c.cli != nil {
		c.cli.Close()
		c.cli = nil
	}
	c.mu.Unlock()
	var followers, leaders []*Member
	for _, m := range c.Members {
		if m.cmd == nil {
			continue
		}
		if m.isLeader() {
			leaders = append(leaders, m)
		} else {
			followers = append(followers, m)
		}
	}
	for _, group := range [][]*Member{followers, leaders} {
		for _, m := range group {
			m.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, m := range group {
			select {
			case <-m.exited:
			case <-time.After(stopTimeout):
				t.Logf("etcdtest: %s (pid %d) ignored SIGTERM for %v; killing it", m.Name, m.PID, stopTimeout)
				m.cmd.Process.Kill()
				<-m.exited
			}
		}
	}
	if t.Failed() {
		for _, m := range c.Members {
			t.Logf("etcdtest: --- tail of %s (pid %d) log ---\n%s", m.Name, m.PID, m.logTail(2048))
		}
	}
}

// isLeader reports whether the member's etcd_server_is_leader gauge is 1;
// false when it cannot be scraped (it has exited, or never came up).
func (m *Member) isLeader() bool {
	select {
	case <-m.exited:
		return false
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	fams, err := Scrape(ctx, m.MetricsURL, nil)
	if err != nil {
		return false
	}
	for _, s := range fams["etcd_server_is_leader"].GetMetric() {
		if s.GetGauge().GetValue() == 1 {
			return true
		}
	}
	return false
}

// LockPorts takes the host-wide lock Start holds (see the package doc) until
// t's cleanup, for tests that bind ports 2379-2381 on loopback themselves
// (a fake peer on :2380, say): they then queue behind etcd clusters of
// other packages' tests instead of colliding with them. Do not call it in
// a test that also calls Start: the two would wait for each other.
func LockPorts(t testing.TB) {
	t.Helper()
	unlock, err := lockPorts(lockTimeout, t.Logf)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	t.Cleanup(unlock)
}

// lockPorts takes the host-wide lock on the fixed etcd ports (see the
// package doc), waiting up to timeout, and returns its release. It says
// through logf when it has to wait. A test that calls Start twice without
// its first cluster's cleanup in between waits for itself until timeout.
func lockPorts(timeout time.Duration, logf func(string, ...any)) (func(), error) {
	return lockPortsAt(filepath.Join(os.TempDir(), "etcdscope-etcdtest.lock"), portLockName, timeout, logf)
}

// portLockName is the abstract Unix socket (Linux: a name in the network
// namespace, no file) whose listener is the port lock: one bind succeeds
// per namespace, and the kernel releases it when its holder exits.
const portLockName = "@etcdscope-etcdtest-ports"

// lockPortsAt takes the flock on path, then the socket name, in that order
// (every holder takes them so: no two wait for each other), waiting up to
// timeout for both.
func lockPortsAt(path, name string, timeout time.Duration, logf func(string, ...any)) (func(), error) {
	// Read-only: flock needs no write access, so root and non-root test
	// runs can share the lock file whichever of them created it.
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening port lock: %w", err)
	}
	deadline := time.Now().Add(timeout)
	flocked := false
	for waited := false; ; waited = true {
		var held string
		if !flocked {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			flocked = err == nil
			if err != nil && !errors.Is(err, syscall.EWOULDBLOCK) {
				f.Close()
				return nil, fmt.Errorf("locking %s: %w", path, err)
			}
			held = path
		}
		if flocked {
			l, err := net.Listen("unix", name)
			if err == nil {
				// Closing the last descriptor releases the flock.
				return func() { l.Close(); f.Close() }, nil
			}
			if !errors.Is(err, syscall.EADDRINUSE) {
				f.Close()
				return nil, fmt.Errorf("binding port lock %s: %w", name, err)
			}
			held = name
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("port lock %s held for %v (another test's etcd cluster holds ports %d-%d)", held, timeout, ClientPort, MetricsPort)
		}
		if !waited {
			logf("etcdtest: waiting up to %v for %s: another test's etcd cluster is running", timeout, held)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitPortsFree waits up to timeout until each of ips' client, peer and
// metrics ports can be bound (a probe listener, closed at once: Go's
// listeners, etcd's among them, set SO_REUSEADDR, so only a listener
// makes a port busy, not a closed cluster's TIME_WAIT connections).
func waitPortsFree(ips []string, timeout time.Duration, logf func(string, ...any)) error {
	deadline := time.Now().Add(timeout)
	for waited := false; ; waited = true {
		busy := ""
		for _, ip := range ips {
			for _, port := range []int{ClientPort, PeerPort, MetricsPort} {
				l, err := net.Listen("tcp", hostPort(ip, port))
				if errors.Is(err, syscall.EADDRINUSE) {
					busy = hostPort(ip, port)
					break
				}
				// Another error (EADDRNOTAVAIL: an address of another
				// network namespace, as the VM scenarios' members have)
				// is no port of this namespace to wait for.
				if err == nil {
					l.Close()
				}
			}
			if busy != "" {
				break
			}
		}
		if busy == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still taken after %v by a process outside the port lock", busy, timeout)
		}
		if !waited {
			logf("etcdtest: waiting up to %v for %s: taken by a process outside the port lock", timeout, busy)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Endpoints returns every member's client URL, in member order.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientURL)
	}
	return eps
}

// TLSConfig returns a fresh client TLS configuration (the harness CA as
// root, the client certificate for etcd's --client-cert-auth), or nil
// without ClientTLS. It panics if the files Start wrote are unreadable,
// which cannot happen while the test runs.
func (c *Cluster) TLSConfig() *tls.Config {
	if !c.clientTLS {
		return nil
	}
	cfg, err := loadTLS(c.CAFile, c.ClientCertFile, c.ClientKeyFile)
	if err != nil {
		panic(fmt.Sprintf("etcdtest: %v", err))
	}
	return cfg
}

func loadTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in %s", caFile)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading client certificate: %w", err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

func (c *Cluster) newClient() (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   c.Endpoints(),
		DialTimeout: 5 * time.Second,
		TLS:         c.TLSConfig(),
		Logger:      zap.NewNop(), // errors come back as values; its logs only add noise
	})
	if err != nil {
		return nil, fmt.Errorf("connecting to %v: %w", c.Endpoints(), err)
	}
	return cli, nil
}

// client returns the cluster's shared client, making it on first use.
func (c *Cluster) client() (*clientv3.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cli != nil {
		return c.cli, nil
	}
	cli, err := c.newClient()
	if err != nil {
		return nil, err
	}
	c.cli = cli
	return cli, nil
}

// Client returns a new client on every member's endpoint (TLS when the
// cluster has ClientTLS), closed by t.Cleanup.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := c.newClient()
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Leader returns the member that is Raft leader now, by asking each member
// for its status (Maintenance.Status: the answering member's ID and the
// leader it knows). It errors when no member claims to lead.
func (c *Cluster) Leader(ctx context.Context) (*Member, error) {
	cli, err := c.client()
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, m := range c.Members {
		st, err := cli.Status(ctx, m.ClientURL)
		if err != nil {
			errs = append(errs, fmt.Errorf("status of %s: %w", m.Name, err))
			continue
		}
		if st.Leader != 0 && st.Leader == st.Header.MemberId {
			return m, nil
		}
	}
	return nil, fmt.Errorf("no member leads: %w", errors.Join(errs...))
}
