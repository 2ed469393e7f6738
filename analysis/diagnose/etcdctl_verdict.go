package diagnose

import "time"

// PerfCause is what a check perf result rests on.
type PerfCause string

// The causes a run's lines allow.
const (
	// PerfPassed: every line passed.
	PerfPassed PerfCause = "passed"
	// PerfErrors: puts failed (FAIL: ERROR(...) lines).
	PerfErrors PerfCause = "errors"
	// PerfLatency: the slowest put or the stddev failed.
	PerfLatency PerfCause = "latency"
	// PerfClientBound: only the throughput failed, and the clients were
	// not all busy (ImpliedMean > Slowest): the check's own client did
	// not offer the load, the cluster's latency did not hold it back.
	PerfClientBound PerfCause = "client-bound"
	// PerfThroughput: only the throughput failed, and latency can
	// explain it (the mean put took about ImpliedMean).
	PerfThroughput PerfCause = "throughput"
	// PerfIncomplete: the paste holds no verdict line of the run's own.
	PerfIncomplete PerfCause = "incomplete"
)

// PerfVerdict is what one check perf result says, in numbers.
type PerfVerdict struct {
	Run PerfRun `json:"run"`
	// Profile: the run's model, or (Load unknown) the lightest the
	// numbers allow; HasProfile false when none is known.
	Profile    PerfLoad `json:"profile"`
	HasProfile bool     `json:"has_profile"`
	// Heavy: l or xl (500 or 1000 clients in one etcdctl process).
	Heavy bool      `json:"heavy"`
	Cause PerfCause `json:"cause"`
	// ImpliedMean: Profile.Clients / Throughput, the mean put latency if
	// every client was busy all the run (Little's law); set when the
	// throughput failed. Below the limit the generator blocks on busy
	// clients, so either they were all busy (and the mean is this) or
	// the generator itself fell behind.
	ImpliedMean time.Duration `json:"implied_mean_ns,omitempty"`
	// OverHeartbeat: the slowest put took longer than etcd's default
	// heartbeat interval (100 ms), whatever the verdict.
	OverHeartbeat bool `json:"over_heartbeat"`
}

// judgePerf grades one run.
func judgePerf(r PerfRun) (PerfVerdict, Severity) {
	v := PerfVerdict{Run: r, OverHeartbeat: r.HasSlowest && r.Slowest > DefaultHeartbeat}
	if p, ok := r.Profile(); ok {
		v.Profile, v.HasProfile = p, true
	} else if len(r.Candidates) > 0 {
		// The lightest candidate has the fewest clients, so the
		// smallest ImpliedMean: a client-bound verdict on it holds for
		// every candidate.
		for _, l := range PerfLoads {
			if l.Name == r.Candidates[0] {
				v.Profile, v.HasProfile = l, true
			}
		}
	}
	v.Heavy = v.HasProfile && v.Profile.Clients >= 500
	if v.HasProfile && r.HasThroughput && !r.ThroughputPass && r.Throughput > 0 {
		v.ImpliedMean = time.Duration(float64(v.Profile.Clients) / float64(r.Throughput) * float64(time.Second))
	}
	switch {
	case len(r.Errors) > 0:
		v.Cause = PerfErrors
		return v, Bad
	case (r.HasSlowest && !r.SlowestPass) || (r.HasStddev && !r.StddevPass):
		v.Cause = PerfLatency
		if v.Heavy {
			// The check's own client (500 or 1000 of them) times
			// every put: it may be what was slow.
			return v, Warn
		}
		return v, Bad
	case r.HasThroughput && !r.ThroughputPass && v.ImpliedMean > 0 && r.HasSlowest && v.ImpliedMean > r.Slowest:
		v.Cause = PerfClientBound
		return v, Warn
	case r.HasThroughput && !r.ThroughputPass:
		v.Cause = PerfThroughput
		if v.Heavy || !v.HasProfile {
			return v, Warn
		}
		return v, Bad
	case !r.HasThroughput && !r.HasSlowest && !r.HasStddev:
		v.Cause = PerfIncomplete
		return v, Unknown
	}
	v.Cause = PerfPassed
	if v.OverHeartbeat {
		return v, Warn
	}
	return v, OK
}

// SnapshotCatchUpEntries: entries the leader keeps behind a snapshot for
// slow followers (etcdserver's SnapshotCatchUpEntries, 5000): a follower
// further behind is sent a whole snapshot.
const SnapshotCatchUpEntries = 5000

// MaxApplyGap: etcd refuses proposals with "too many requests" when the
// applied index trails the committed one by more than this
// (etcdserver's maxGapBetweenApplyAndCommitIndex).
const MaxApplyGap = 5000

// DefaultQuota: --quota-backend-bytes' default (2 GiB); a member whose
// database outgrows its quota raises the NOSPACE alarm and takes no
// writes.
const DefaultQuota = 2 << 30

// Lag is how far one endpoint trails.
type Lag struct {
	Endpoint string `json:"endpoint"`
	Behind   uint64 `json:"behind"`
}

// StatusVerdict is one `endpoint status` output, in numbers.
type StatusVerdict struct {
	Source string           `json:"source"`
	Rows   []EndpointStatus `json:"rows"`
	// Leaders: the endpoints that say they lead. LeaderElsewhere: the
	// leader the -w json rows name when none of them leads (a member not
	// asked); Leaderless: an endpoint whose -w json row names no leader.
	Leaders         []string `json:"leaders"`
	LeaderElsewhere string   `json:"leader_elsewhere,omitempty"`
	Leaderless      []string `json:"leaderless,omitempty"`
	// MinTerm, MaxTerm over the reachable endpoints.
	MinTerm uint64 `json:"min_term"`
	MaxTerm uint64 `json:"max_term"`
	// MaxIndex: the highest raft index; Behind: each endpoint's distance
	// from it (endpoints are asked one after another: under load a few
	// entries apart is the time between the questions).
	MaxIndex uint64 `json:"max_index"`
	Behind   []Lag  `json:"behind,omitempty"`
	// ApplyGap: raft index minus applied index per endpoint (3.4+).
	ApplyGap []Lag `json:"apply_gap,omitempty"`
	// Unreachable: endpoints etcdctl could not ask; Alarms: endpoints
	// with an ERRORS column (NOSPACE, CORRUPT).
	Unreachable []EndpointStatus `json:"unreachable,omitempty"`
	Alarms      []EndpointStatus `json:"alarms,omitempty"`
	// LargestDB: the largest DB SIZE, bytes.
	LargestDB int64 `json:"largest_db_bytes"`
}

func judgeStatus(src string, rows []EndpointStatus) (StatusVerdict, Severity) {
	v := StatusVerdict{Source: src, Rows: rows}
	var up []EndpointStatus
	for _, s := range rows {
		if s.Failed != "" {
			v.Unreachable = append(v.Unreachable, s)
			continue
		}
		up = append(up, s)
		if s.IsLeader {
			v.Leaders = append(v.Leaders, s.Endpoint)
		}
		switch s.LeaderID {
		case "":
		case "0":
			v.Leaderless = append(v.Leaderless, s.Endpoint)
		default:
			v.LeaderElsewhere = s.LeaderID
		}
		if s.Errors != "" {
			v.Alarms = append(v.Alarms, s)
		}
		if v.MinTerm == 0 || s.RaftTerm < v.MinTerm {
			v.MinTerm = s.RaftTerm
		}
		v.MaxTerm = max(v.MaxTerm, s.RaftTerm)
		v.MaxIndex = max(v.MaxIndex, s.RaftIndex)
		v.LargestDB = max(v.LargestDB, s.DBSize)
		if s.HasApplied && s.RaftIndex > s.AppliedIndex {
			v.ApplyGap = append(v.ApplyGap, Lag{s.Endpoint, s.RaftIndex - s.AppliedIndex})
		}
	}
	worst := OK
	for _, s := range up {
		if b := v.MaxIndex - s.RaftIndex; b > 0 {
			v.Behind = append(v.Behind, Lag{s.Endpoint, b})
			if b > SnapshotCatchUpEntries && worst == OK {
				worst = Warn
			}
		}
	}
	for _, g := range v.ApplyGap {
		if g.Behind > MaxApplyGap {
			worst = Bad
		}
	}
	if len(v.Leaders) > 0 {
		v.LeaderElsewhere = ""
	}
	switch {
	case len(up) == 0 || len(v.Leaderless) > 0 || len(v.Alarms) > 0 || len(v.Leaders) > 1:
		worst = Bad
	case len(v.Leaders) == 0 && v.LeaderElsewhere == "":
		// None of those asked leads: the leader may be one not asked
		// or not answering; if they are all the members, there is none.
		worst = Warn
	case worst == OK && (len(v.Unreachable) > 0 || v.MinTerm != v.MaxTerm || v.LargestDB >= DefaultQuota*8/10):
		worst = Warn
	}
	return v, worst
}

// HealthVerdict is one `endpoint health` output, in numbers.
type HealthVerdict struct {
	Source    string           `json:"source"`
	Rows      []EndpointHealth `json:"rows"`
	Unhealthy int              `json:"unhealthy"`
	// MaxTook: the slowest healthy endpoint's read.
	MaxTook time.Duration `json:"max_took_ns"`
}

func judgeHealth(src string, rows []EndpointHealth) (HealthVerdict, Severity) {
	v := HealthVerdict{Source: src, Rows: rows}
	for _, h := range rows {
		if !h.Healthy {
			v.Unhealthy++
			continue
		}
		v.MaxTook = max(v.MaxTook, h.Took)
	}
	switch {
	case v.Unhealthy > 0:
		return v, Bad
	case v.MaxTook >= DefaultHeartbeat:
		return v, Warn
	}
	return v, OK
}

func (r *Report) etcdctlFindings(reads []EtcdctlRead) {
	for _, e := range reads {
		for _, run := range e.Perf {
			v, sev := judgePerf(run)
			r.Findings = append(r.Findings, Finding{Topic: TopicCheckPerf, Subject: e.Source, Severity: sev, Perf: &v})
		}
		if len(e.Status) > 0 {
			v, sev := judgeStatus(e.Source, e.Status)
			r.Findings = append(r.Findings, Finding{Topic: TopicEndpointStatus, Subject: e.Source, Severity: sev, Status: &v})
		}
		if len(e.Health) > 0 {
			v, sev := judgeHealth(e.Source, e.Health)
			r.Findings = append(r.Findings, Finding{Topic: TopicEndpointHealth, Subject: e.Source, Severity: sev, Health: &v})
		}
	}
}
