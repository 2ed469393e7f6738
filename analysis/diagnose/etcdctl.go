package diagnose

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/etcdscope/etcdscope/analysis/jsonl"
)

// PerfLoad is one of `etcdctl check perf`'s workload models: the
// throughput its rate limiter offers (puts/s), the gRPC clients it opens,
// and for how long (etcdctl/ctlv3/command/check.go, checkPerfCfgMap; the
// same in etcd 3.3 to 3.6). Every put is a 256-byte key and a 1 KiB value.
type PerfLoad struct {
	Name     string        `json:"name"`
	Limit    int           `json:"limit_writes_per_second"`
	Clients  int           `json:"clients"`
	Duration time.Duration `json:"duration_ns"`
}

// PerfLoads are check perf's four models, lightest first.
var PerfLoads = []PerfLoad{
	{"s", 150, 50, 60 * time.Second},
	{"m", 1000, 200, 60 * time.Second},
	{"l", 8000, 500, 60 * time.Second},
	{"xl", 15000, 1000, 60 * time.Second},
}

// check perf's thresholds (check.go): throughput fails at or below 90%
// of the limit, the slowest put over 500 ms, the stddev over 100 ms.
const (
	PerfThroughputShare = 0.9
	PerfSlowestLimit    = 500 * time.Millisecond
	PerfStddevLimit     = 100 * time.Millisecond
)

// LoadFrom says how a run's workload model is known.
type LoadFrom string

// How the model is known: the --load flag on the pasted command line; the
// command line without --load (check perf's default, s); the throughput
// of a pass (a pass lies in (90%, 100%] of one limit, and those ranges do
// not overlap); or not at all (Candidates then lists the models the
// numbers allow).
const (
	LoadFlag       LoadFrom = "flag"
	LoadDefault    LoadFrom = "default"
	LoadThroughput LoadFrom = "throughput"
	LoadUnknown    LoadFrom = "unknown"
)

// PerfRun is one `etcdctl check perf` result as printed.
type PerfRun struct {
	Source string `json:"source"`
	Line   int    `json:"line"` // the run's first line in the input
	// Load: the model's name ("" when unknown), LoadFrom how it is
	// known, Candidates the models the numbers allow when it is not.
	Load       string   `json:"load,omitempty"`
	LoadFrom   LoadFrom `json:"load_from"`
	Candidates []string `json:"candidates,omitempty"`
	// Throughput: the puts/s printed (check.go prints int(RPS)+1).
	Throughput     int  `json:"throughput"`
	HasThroughput  bool `json:"has_throughput"`
	ThroughputPass bool `json:"throughput_pass"`
	// Slowest, Stddev: the slowest put and the standard deviation of all.
	Slowest     time.Duration `json:"slowest_ns"`
	HasSlowest  bool          `json:"has_slowest"`
	SlowestPass bool          `json:"slowest_pass"`
	Stddev      time.Duration `json:"stddev_ns"`
	HasStddev   bool          `json:"has_stddev"`
	StddevPass  bool          `json:"stddev_pass"`
	// Errors: "FAIL: ERROR(<err>) -> <count>" lines.
	Errors []PerfError `json:"errors,omitempty"`
	// Result: the closing "PASS" or "FAIL" ("" when the paste was cut
	// before it).
	Result string `json:"result,omitempty"`
}

// PerfError is one kind of failed put and how many.
type PerfError struct {
	Error string `json:"error"`
	Count int    `json:"count"`
}

// Profile is the run's model, when known.
func (r PerfRun) Profile() (PerfLoad, bool) {
	for _, l := range PerfLoads {
		if l.Name == r.Load {
			return l, true
		}
	}
	return PerfLoad{}, false
}

// EndpointStatus is one row of `etcdctl endpoint status` (table, simple
// or JSON), or an endpoint whose status could not be read (Failed).
type EndpointStatus struct {
	Endpoint string `json:"endpoint"`
	ID       string `json:"id,omitempty"`
	Version  string `json:"version,omitempty"`
	// DBSize: bytes, as etcdctl printed it (humanized "20 kB" is 20000
	// bytes: go-humanize's SI units).
	DBSize       int64  `json:"db_size_bytes,omitempty"`
	IsLeader     bool   `json:"is_leader"`
	IsLearner    bool   `json:"is_learner,omitempty"`
	RaftTerm     uint64 `json:"raft_term"`
	RaftIndex    uint64 `json:"raft_index"`
	AppliedIndex uint64 `json:"raft_applied_index,omitempty"`
	HasApplied   bool   `json:"has_applied_index"`
	Errors       string `json:"errors,omitempty"`
	// LeaderID: the leader this endpoint knows, hex ("0": none); only
	// -w json says it.
	LeaderID string `json:"leader_id,omitempty"`
	// Failed: why etcdctl could not read this endpoint's status.
	Failed string `json:"failed,omitempty"`
}

// EndpointHealth is one endpoint of `etcdctl endpoint health`.
type EndpointHealth struct {
	Endpoint string        `json:"endpoint"`
	Healthy  bool          `json:"healthy"`
	Took     time.Duration `json:"took_ns,omitempty"`
	Error    string        `json:"error,omitempty"`
}

// EtcdctlRead is what ReadEtcdctl understood of one input.
type EtcdctlRead struct {
	Source string           `json:"source"`
	Perf   []PerfRun        `json:"perf,omitempty"`
	Status []EndpointStatus `json:"status,omitempty"`
	Health []EndpointHealth `json:"health,omitempty"`
}

var (
	// etcdctlRe recognises the outputs ReadEtcdctl reads.
	etcdctlRe     = regexp.MustCompile(`(?m)(^(?:#\s*)?(?:(?:PASS|FAIL): (?:Throughput|Slowest request|Stddev)|Slowest request took too long: |Stddev too high: )|\|\s*ENDPOINT\s*\|\s*(?:ID|HEALTH)\s*\||^\S+ is (?:un)?healthy: |^\S+, [0-9a-f]{1,16}, \d+\.\d+\.\d+\S*, [0-9.]+ [kMGT]?i?B, (?:true|false), )`)
	perfCmdRe     = regexp.MustCompile(`check perf\b(.*)`)
	perfLoadArgRe = regexp.MustCompile(`--load(?:=|\s+)["']?(\w+)`)
	perfTputRe    = regexp.MustCompile(`^(PASS|FAIL): Throughput (?:is|too low:) (\d+) writes/s`)
	perfSlowRe    = regexp.MustCompile(`^(?:PASS: Slowest request took|Slowest request took too long:) ([0-9.]+)s`)
	perfStddevRe  = regexp.MustCompile(`^(?:PASS: Stddev is|Stddev too high:) ([0-9.]+)s`)
	perfErrRe     = regexp.MustCompile(`^FAIL: ERROR\((.*)\) -> (\d+)$`)
	healthRe      = regexp.MustCompile(`^(\S+) is (healthy|unhealthy): (?:successfully committed proposal: took = (\S+)|(.*))$`)
	simpleStatRe  = regexp.MustCompile(`^(\S+), ([0-9a-f]{1,16}), (\d+\.\d+\.\d+\S*), ([0-9.]+ [kMGT]?i?B), (true|false), (.*)$`)
	jsonArrayRe   = regexp.MustCompile(`^\[\s*\{`)
	failStatRe    = regexp.MustCompile(`^Failed to get the status of endpoint (\S+) \((.*)\)$`)
)

// looksLikeEtcdctl: the text holds check perf's verdict lines or an
// endpoint status/health table or line.
func looksLikeEtcdctl(head []byte) bool { return etcdctlRe.Match(head) }

// ReadEtcdctl reads the etcdctl outputs operators paste, in any mix:
// `check perf` (its PASS/FAIL lines, several runs one after another),
// `endpoint status` (-w table, the simple comma lines, -w json) and
// `endpoint health` (the plain lines, -w table, -w json). Other lines
// (prompts, etcdctl's own warnings, the progress bar) are skipped.
func ReadEtcdctl(in Input) (EtcdctlRead, error) {
	r := EtcdctlRead{Source: in.Name}
	if t := bytes.TrimSpace(in.Data); jsonArrayRe.Match(t) {
		if err := r.readJSON(t); err != nil {
			return r, err
		}
		r.Status = lastPerEndpoint(r.Status)
		return r, nil
	}
	var run *PerfRun
	var header []string // the current table's column names
	cmdLoad, sawCmd := "", false
	flush := func() {
		if run != nil {
			run.resolveLoad(cmdLoad, sawCmd)
			r.Perf = append(r.Perf, *run)
			run = nil
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(in.Data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		l := strings.TrimSpace(strings.TrimRight(sc.Text(), "\r"))
		l = strings.TrimSpace(strings.TrimPrefix(l, "#")) // a README's commented output
		if m := perfCmdRe.FindStringSubmatch(l); m != nil && !strings.HasPrefix(l, "PASS") && !strings.HasPrefix(l, "FAIL") {
			flush()
			sawCmd, cmdLoad = true, ""
			if a := perfLoadArgRe.FindStringSubmatch(m[1]); a != nil {
				cmdLoad = a[1]
			}
			continue
		}
		open := func() *PerfRun {
			if run == nil {
				run = &PerfRun{Source: in.Name, Line: n}
			}
			return run
		}
		switch {
		case perfTputRe.MatchString(l):
			m := perfTputRe.FindStringSubmatch(l)
			p := open()
			p.Throughput, _ = strconv.Atoi(m[2])
			p.HasThroughput, p.ThroughputPass = true, m[1] == "PASS"
		case perfSlowRe.MatchString(l):
			m := perfSlowRe.FindStringSubmatch(l)
			p := open()
			p.Slowest, p.HasSlowest, p.SlowestPass = seconds(m[1]), true, strings.HasPrefix(l, "PASS")
		case perfStddevRe.MatchString(l):
			m := perfStddevRe.FindStringSubmatch(l)
			p := open()
			p.Stddev, p.HasStddev, p.StddevPass = seconds(m[1]), true, strings.HasPrefix(l, "PASS")
		case perfErrRe.MatchString(l):
			m := perfErrRe.FindStringSubmatch(l)
			c, _ := strconv.Atoi(m[2])
			p := open()
			p.Errors = append(p.Errors, PerfError{Error: m[1], Count: c})
		case l == "FAIL: too many errors":
			open()
		case (l == "PASS" || l == "FAIL") && run != nil:
			run.Result = l
			flush()
			sawCmd, cmdLoad = false, ""
		case strings.HasPrefix(l, "|"):
			cells := tableCells(l)
			if len(cells) > 0 && strings.EqualFold(cells[0], "ENDPOINT") {
				header = cells
				continue
			}
			r.addRow(header, cells)
		case strings.HasPrefix(l, "+-"):
		case strings.HasPrefix(l, "[{"):
			// A -w json line among the text (several commands pasted).
			if err := r.readJSON([]byte(l)); err != nil {
				return r, fmt.Errorf("line %d: %w", n, err)
			}
		default:
			r.addLine(l)
		}
	}
	flush()
	r.Status = lastPerEndpoint(r.Status)
	return r, nil
}

// lastPerEndpoint keeps each endpoint's last row: a paste of the same
// status twice (simple, then -w json) is one endpoint.
func lastPerEndpoint(rows []EndpointStatus) []EndpointStatus {
	var out []EndpointStatus
	at := map[string]int{}
	for _, s := range rows {
		if i, ok := at[s.Endpoint]; ok {
			out[i] = s
			continue
		}
		at[s.Endpoint] = len(out)
		out = append(out, s)
	}
	return out
}

// resolveLoad names the run's model: from the command line, else from a
// passing throughput, else the models a failing one allows.
func (p *PerfRun) resolveLoad(cmdLoad string, sawCmd bool) {
	alias := map[string]string{"s": "s", "small": "s", "m": "m", "medium": "m", "l": "l", "large": "l", "xl": "xl", "xLarge": "xl"}
	switch {
	case cmdLoad != "" && alias[cmdLoad] != "":
		p.Load, p.LoadFrom = alias[cmdLoad], LoadFlag
		return
	case sawCmd && cmdLoad == "":
		p.Load, p.LoadFrom = "s", LoadDefault
		return
	}
	p.LoadFrom = LoadUnknown
	if !p.HasThroughput {
		return
	}
	for _, l := range PerfLoads {
		// check.go prints int(RPS)+1; the limiter never exceeds Limit.
		rps := float64(p.Throughput - 1)
		pass := rps/float64(l.Limit) > PerfThroughputShare && rps <= float64(l.Limit)
		switch {
		case p.ThroughputPass && pass:
			p.Load, p.LoadFrom = l.Name, LoadThroughput
			return
		case !p.ThroughputPass && rps/float64(l.Limit) <= PerfThroughputShare:
			p.Candidates = append(p.Candidates, l.Name)
		}
	}
	if len(p.Candidates) == 1 {
		p.Load, p.LoadFrom, p.Candidates = p.Candidates[0], LoadThroughput, nil
	}
}

func seconds(s string) time.Duration {
	f, _ := strconv.ParseFloat(s, 64)
	return time.Duration(math.Round(f * 1e9))
}

func tableCells(l string) []string {
	parts := strings.Split(strings.Trim(l, "|"), "|")
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = strings.TrimSpace(p)
	}
	return out
}

// addRow reads one table row under its header: endpoint status (ID, DB
// SIZE, IS LEADER, RAFT TERM, RAFT INDEX, …) or endpoint health (HEALTH,
// TOOK, ERROR).
func (r *EtcdctlRead) addRow(header, cells []string) {
	if len(header) != len(cells) {
		return
	}
	col := map[string]string{}
	for i, h := range header {
		col[strings.ToUpper(h)] = cells[i]
	}
	if h, ok := col["HEALTH"]; ok {
		e := EndpointHealth{Endpoint: col["ENDPOINT"], Healthy: h == "true", Error: col["ERROR"]}
		e.Took, _ = time.ParseDuration(col["TOOK"])
		r.Health = append(r.Health, e)
		return
	}
	if _, ok := col["IS LEADER"]; !ok {
		return
	}
	s := EndpointStatus{Endpoint: col["ENDPOINT"], ID: col["ID"], Version: col["VERSION"], Errors: col["ERRORS"],
		IsLeader: col["IS LEADER"] == "true", IsLearner: col["IS LEARNER"] == "true"}
	s.DBSize = humanBytes(col["DB SIZE"])
	s.RaftTerm, _ = strconv.ParseUint(col["RAFT TERM"], 10, 64)
	s.RaftIndex, _ = strconv.ParseUint(col["RAFT INDEX"], 10, 64)
	if a, ok := col["RAFT APPLIED INDEX"]; ok {
		s.AppliedIndex, _ = strconv.ParseUint(a, 10, 64)
		s.HasApplied = true
	}
	r.Status = append(r.Status, s)
}

// addLine reads one plain line: endpoint health's "<ep> is healthy: …",
// endpoint status's simple "<ep>, <id>, <version>, <db size>, <leader>,
// [<learner>,] <term>, <index>[, <applied>, <errors>]", or its "Failed to
// get the status of endpoint <ep> (<err>)".
func (r *EtcdctlRead) addLine(l string) {
	if m := healthRe.FindStringSubmatch(l); m != nil {
		// "failed to commit proposal: <err>" (the read failed) or
		// "failed to connect: <err>" (etcdctl never reached it).
		e := EndpointHealth{Endpoint: m[1], Healthy: m[2] == "healthy", Error: strings.TrimPrefix(m[4], "failed to commit proposal: ")}
		e.Took, _ = time.ParseDuration(m[3])
		r.Health = append(r.Health, e)
		return
	}
	if m := failStatRe.FindStringSubmatch(l); m != nil {
		r.Status = append(r.Status, EndpointStatus{Endpoint: m[1], Failed: m[2]})
		return
	}
	m := simpleStatRe.FindStringSubmatch(l)
	if m == nil {
		return
	}
	s := EndpointStatus{Endpoint: m[1], ID: m[2], Version: m[3], DBSize: humanBytes(m[4]), IsLeader: m[5] == "true"}
	rest := strings.Split(m[6], ",")
	for i := range rest {
		rest[i] = strings.TrimSpace(rest[i])
	}
	// 3.4+ prints the learner flag after the leader's and the applied
	// index and errors after the index (a trailing comma when none).
	if len(rest) > 0 && (rest[0] == "true" || rest[0] == "false") {
		s.IsLearner, rest = rest[0] == "true", rest[1:]
	}
	if len(rest) >= 2 {
		s.RaftTerm, _ = strconv.ParseUint(rest[0], 10, 64)
		s.RaftIndex, _ = strconv.ParseUint(rest[1], 10, 64)
	}
	if len(rest) >= 3 && rest[2] != "" {
		s.AppliedIndex, _ = strconv.ParseUint(rest[2], 10, 64)
		s.HasApplied = true
	}
	if len(rest) >= 4 {
		s.Errors = strings.Join(rest[3:], ",")
		s.Errors = strings.Trim(s.Errors, ", ")
	}
	r.Status = append(r.Status, s)
}

// humanBytes reads go-humanize's Bytes ("20 kB", "1.2 GB": SI) and
// IBytes ("20 KiB") back to bytes.
func humanBytes(s string) int64 {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	mult := map[string]float64{"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
	if len(f) > 1 {
		v *= mult[f[1]]
	}
	return int64(v)
}

// readJSON reads `endpoint status -w json` ([{"Endpoint", "Status":
// {"header", "version", "dbSize", TopicLeader, "raftIndex", "raftTerm", …}}])
// and `endpoint health -w json` ([{"endpoint", "health", "took",
// "error"}]).
func (r *EtcdctlRead) readJSON(t []byte) error {
	var rows []struct {
		Endpoint  string `json:"Endpoint"`
		Endpoint2 string `json:"endpoint"`
		Status    *struct {
			Header struct {
				MemberID uint64 `json:"member_id"`
				RaftTerm uint64 `json:"raft_term"`
			} `json:"header"`
			Version          string   `json:"version"`
			DBSize           int64    `json:"dbSize"`
			Leader           uint64   `json:"leader"`
			RaftIndex        uint64   `json:"raftIndex"`
			RaftTerm         uint64   `json:"raftTerm"`
			RaftAppliedIndex *uint64  `json:"raftAppliedIndex"`
			Errors           []string `json:"errors"`
			IsLearner        bool     `json:"isLearner"`
		} `json:"Status"`
		Health *bool  `json:"health"`
		Took   string `json:"took"`
		Error  string `json:"error"`
	}
	// etcdctl prints several JSON arrays one after another when several
	// commands' outputs are pasted: read them all.
	if jsonl.TooManyObjects(t, MaxJSONObjects) {
		return ErrTooManyObjects
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	for dec.More() {
		if err := dec.Decode(&rows); err != nil {
			return err
		}
		for _, x := range rows {
			switch {
			case x.Status != nil:
				st := x.Status
				s := EndpointStatus{Endpoint: x.Endpoint, ID: strconv.FormatUint(st.Header.MemberID, 16), Version: st.Version,
					DBSize: st.DBSize, IsLeader: st.Leader != 0 && st.Leader == st.Header.MemberID, IsLearner: st.IsLearner,
					RaftTerm: st.RaftTerm, RaftIndex: st.RaftIndex, Errors: strings.TrimSpace(strings.Join(st.Errors, ", ")),
					LeaderID: strconv.FormatUint(st.Leader, 16)}
				if s.RaftTerm == 0 {
					s.RaftTerm = st.Header.RaftTerm
				}
				if st.RaftAppliedIndex != nil {
					s.AppliedIndex, s.HasApplied = *st.RaftAppliedIndex, true
				}
				r.Status = append(r.Status, s)
			case x.Health != nil:
				e := EndpointHealth{Endpoint: x.Endpoint2, Healthy: *x.Health, Error: x.Error}
				e.Took, _ = time.ParseDuration(x.Took)
				r.Health = append(r.Health, e)
			}
		}
		rows = rows[:0]
	}
	return nil
}
