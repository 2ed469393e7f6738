package diagnose

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// EventKind names what a log line says.
type EventKind string

// The log events the diagnosis uses.
const (
	EvSlowFdatasync EventKind = "slow_fdatasync" // "sync duration of X, expected less than Y" / "slow fdatasync"
	EvHeartbeatLate EventKind = "heartbeat_late" // "failed to send out heartbeat on time"
	EvApplySlow     EventKind = "apply_slow"     // "apply entries took too long" / "apply request took too long"
	EvRequestSlow   EventKind = "request_slow"   // "... took too long (X) to execute" (3.3)
	EvLeader        EventKind = "leader_change"  // became/elected/lost/changed leader ... at term N
	EvConfig        EventKind = "config"         // heartbeat/election settings printed at start
	EvCampaign      EventKind = "campaign"       // "became pre-candidate at term N" / "became candidate at term N"
	EvPeerDown      EventKind = "peer_down"      // the prober or a stream to a peer failed; To is the peer
	EvStart         EventKind = "start"          // the process starts: "starting an etcd server" (zap), "etcd Version: …" (capnslog)
	EvVoters        EventKind = "voters"         // "switched to configuration voters=(…)": Voters is how many
)

// LogEvent is one etcd log line the diagnosis understood.
type LogEvent struct {
	Source string    `json:"source"`
	Line   int       `json:"line"`
	Kind   EventKind `json:"kind"`
	// Time: UTC. HasTime: the line had a time stamp; ZoneKnown: it had a
	// zone (capnslog and syslog stamps have none and are read as UTC);
	// YearKnown: it had a year (syslog's has none).
	Time      time.Time `json:"time"`
	HasTime   bool      `json:"has_time"`
	ZoneKnown bool      `json:"zone_known"`
	YearKnown bool      `json:"year_known"`
	// Took: slow fdatasync / apply / request duration; Expected: the
	// threshold the line names.
	Took     time.Duration `json:"took_ns,omitempty"`
	Expected time.Duration `json:"expected_ns,omitempty"`
	// Heartbeats: Interval (--heartbeat-interval, 0 if the line does not
	// say), Exceeded (the excess over 2×Interval), To (peer ID, hex).
	Interval time.Duration `json:"heartbeat_interval_ns,omitempty"`
	Exceeded time.Duration `json:"exceeded_ns,omitempty"`
	To       string        `json:"to,omitempty"`
	// Config: Election (--election-timeout).
	Election time.Duration `json:"election_timeout_ns,omitempty"`
	// Campaign: PreVote (a pre-candidate round: the term does not rise
	// until a quorum answers). Peer down: Error (why, as logged).
	PreVote bool   `json:"pre_vote,omitempty"`
	Error   string `json:"error,omitempty"`
	Term    int    `json:"term,omitempty"`
	// Leader: Lost ("lost leader X at term N": no leader, not a new
	// one). Voters: the members of the configuration switched to.
	Lost   bool   `json:"lost,omitempty"`
	Voters int    `json:"voters,omitempty"`
	Text   string `json:"text"`
}

// Gap is the time between two heartbeats to one follower that the line
// reports: etcd warns when it exceeds 2×interval, and says by how much
// (etcdserver/raft.go, contention.TimeoutDetector with 2×heartbeat).
func (e LogEvent) Gap() time.Duration {
	if e.Kind != EvHeartbeatLate || e.Interval == 0 {
		return 0
	}
	return 2*e.Interval + e.Exceeded
}

// LogRead is what ReadLog understood of one log.
type LogRead struct {
	Source string     `json:"source"`
	Lines  int        `json:"lines"`
	Events []LogEvent `json:"events"`
	// Formats: how many lines of each format were seen (zap-json,
	// zap-console, capnslog, syslog, raft-stdlog, go-log, none).
	Formats map[string]int `json:"formats"`
}

var (
	criRe      = regexp.MustCompile(`^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)) (?:stdout|stderr) [FP] (.*)$`)
	capnsRe    = regexp.MustCompile(`^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) ([A-Z]) \| (.*)$`)
	syslogRe   = regexp.MustCompile(`^([A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d) \S+ [\w.-]+(?:\[\d+\])?: (.*)$`)
	raftStdRe  = regexp.MustCompile(`^raft(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d) (\w+): (.*)$`)
	goLogRe    = regexp.MustCompile(`^(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d) (.*)$`)
	consoleRe  = regexp.MustCompile(`^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d))\s+([A-Z]+)\s+(.*)$`)
	goremanRe  = regexp.MustCompile(`^\d\d:\d\d:\d\d \S+\s+\| (.*)$`)
	hbTextRe   = regexp.MustCompile(`failed to send out heartbeat on time \(exceeded the (\d+(?:\.\d+)?(?:ns|us|µs|ms|s)) timeout for ([0-9.]+(?:ns|us|µs|ms|s|m[0-9.]*s?)+)(?:, to ([0-9a-f]+))?\)`)
	hbOldRe    = regexp.MustCompile(`failed to send out heartbeat on time \(deadline exceeded for ([0-9.]+(?:ns|us|µs|ms|s)+)\)`)
	syncTextRe = regexp.MustCompile(`sync duration of ([0-9.hms µ]+?), expected less than ([0-9.]+(?:ns|us|µs|ms|s))`)
	applyRe    = regexp.MustCompile(`apply entries took too long \[([0-9.hmsµu]+) for (\d+) entries\]`)
	requestRe  = regexp.MustCompile(`took too long \(([0-9.hmsµu]+)\) to execute`)
	leaderRe   = regexp.MustCompile(`(became leader at term|elected leader \w+ at term|lost leader \w+ at term|changed leader from \w+ to \w+ at term) (\d+)`)
	cfgHbRe    = regexp.MustCompile(`\bheartbeat = (\d+)ms`)
	campaignRe = regexp.MustCompile(`became (pre-)?candidate at term (\d+)`)
	votersRe   = regexp.MustCompile(`switched to configuration voters=\(([0-9a-f ]*)\)`)
	startRe    = regexp.MustCompile(`^(?:starting an etcd server$|(?:etcdmain: )?etcd Version: )`)
	// A peer that does not answer, as capnslog (3.0-3.4) and etcd 2
	// wrote it: the prober's health check, a stream dial or read, a lost
	// stream, an inactive peer. zap writes the same with remote-peer-id.
	peerDownRe = regexp.MustCompile(`(?:health check for peer ([0-9a-f]+) could not connect: (.*?)(?: \(prober "\w+"\))?$|failed to (?:dial|read) ([0-9a-f]+) on stream [^(]*\((.*)\)$|lost the TCP streaming connection with peer ([0-9a-f]+)|the connection to peer ([0-9a-f]+) is unhealthy|peer ([0-9a-f]+) became inactive)`)
	cfgElRe    = regexp.MustCompile(`\belection = (\d+)ms`)
)

// ReadLog reads an etcd log, line by line, whatever mix of formats it
// has: zap JSON (3.4+, also behind a CRI "ts stderr F" prefix), zap
// console, capnslog text (3.0–3.4), journald/syslog lines, raft's own
// "raftYYYY/MM/DD" lines, Docker json-file wrapping, and list or goreman
// prefixes from pastes. A stamp with a zone from the wrapper (CRI,
// Docker) wins over the zone-less stamp inside. Lines
// it does not understand are counted, not fatal.
func ReadLog(in Input) LogRead {
	r := LogRead{Source: in.Name, Formats: map[string]int{}}
	sc := bufio.NewScanner(bytes.NewReader(in.Data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		r.Lines++
		line := strings.TrimRight(sc.Text(), "\r")
		ev, format, ok := parseLogLine(line)
		r.Formats[format]++
		// A message without a log line's stamp or JSON around it is
		// prose quoting etcd (a README, an issue text), not a log line.
		if !ok || format == "none" {
			continue
		}
		ev.Source, ev.Line = in.Name, r.Lines
		r.Events = append(r.Events, ev)
	}
	return r
}

func parseLogLine(line string) (LogEvent, string, bool) {
	var ev LogEvent
	l := strings.TrimSpace(line)
	for _, p := range []string{"* ", "> ", "- "} {
		l = strings.TrimPrefix(l, p)
	}
	if m := goremanRe.FindStringSubmatch(l); m != nil {
		l = m[1]
	}
	if m := criRe.FindStringSubmatch(l); m != nil {
		if t, ok := parseStamp(m[1]); ok {
			ev.Time, ev.HasTime, ev.ZoneKnown, ev.YearKnown = t, true, true, true
		}
		l = m[2]
	}
	format := "none"
	// Docker's json-file driver wraps each line: {"log":"…\n","time":"…"}.
	if strings.HasPrefix(l, "{") && strings.Contains(l, `"log"`) && !strings.Contains(l, `"msg"`) {
		if obj := decodeObject(l); obj != nil {
			if inner, ok := obj["log"].(string); ok {
				if t, ok := zapTime(obj["time"]); ok {
					ev.Time, ev.HasTime, ev.ZoneKnown, ev.YearKnown = t, true, true, true
				}
				l = strings.TrimSpace(inner)
			}
		}
	}
	msg := l
	var fields map[string]any
	if i := strings.IndexByte(l, '{'); i >= 0 && strings.Contains(l[i:], `"msg"`) {
		if obj := decodeObject(l[i:]); obj != nil {
			fields = findEtcdObject(obj)
		}
	}
	switch {
	case fields != nil:
		format = "zap-json"
		msg, _ = fields["msg"].(string)
		if t, ok := zapTime(fields["ts"]); ok {
			ev.Time, ev.HasTime, ev.ZoneKnown, ev.YearKnown = t, true, true, true
		}
	default:
		if m := capnsRe.FindStringSubmatch(l); m != nil {
			format, msg = "capnslog", m[3]
			setNaive(&ev, "2006-01-02 15:04:05.999999999", m[1], true)
		} else if m := syslogRe.FindStringSubmatch(l); m != nil {
			format, msg = "syslog", m[2]
			setNaive(&ev, "Jan _2 15:04:05", m[1], false)
			// journald forwarding a capnslog line keeps its own stamp
			if m2 := capnsRe.FindStringSubmatch(msg); m2 != nil {
				msg = m2[3]
			}
		} else if m := raftStdRe.FindStringSubmatch(l); m != nil {
			format, msg = "raft-stdlog", m[3]
			setNaive(&ev, "2006/01/02 15:04:05", m[1], true)
		} else if m := consoleRe.FindStringSubmatch(l); m != nil {
			format, msg = "zap-console", m[3]
			if t, ok := parseStamp(m[1]); ok {
				ev.Time, ev.HasTime, ev.ZoneKnown, ev.YearKnown = t, true, true, true
			}
			if i := strings.IndexByte(msg, '{'); i >= 0 {
				if obj := decodeObject(msg[i:]); obj != nil {
					fields = obj
					msg = msg[:i]
				}
			}
		} else if m := goLogRe.FindStringSubmatch(l); m != nil {
			format, msg = "go-log", m[2]
			setNaive(&ev, "2006/01/02 15:04:05", m[1], true)
		}
	}
	ev.Text = strings.TrimSpace(msg)
	dur := func(k string) time.Duration {
		if fields == nil {
			return 0
		}
		switch v := fields[k].(type) {
		case string:
			d, _ := time.ParseDuration(v)
			return d
		case float64: // zap's numeric duration encoder: nanoseconds
			return time.Duration(v)
		}
		return 0
	}
	str := func(k string) string {
		if fields == nil {
			return ""
		}
		s, _ := fields[k].(string)
		return s
	}
	switch {
	case strings.Contains(msg, "failed to send out heartbeat on time"):
		ev.Kind = EvHeartbeatLate
		if m := hbTextRe.FindStringSubmatch(msg); m != nil {
			ev.Interval, _ = time.ParseDuration(m[1])
			ev.Exceeded, _ = time.ParseDuration(m[2])
			ev.To = m[3]
		} else if m := hbOldRe.FindStringSubmatch(msg); m != nil {
			ev.Exceeded, _ = time.ParseDuration(m[1])
		} else {
			ev.Interval, ev.Exceeded, ev.To = dur("heartbeat-interval"), dur("exceeded-duration"), str("to")
			if exp := dur("expected-duration"); exp > 0 && ev.Interval == 0 {
				ev.Interval = exp / 2
			}
		}
	case strings.Contains(msg, "slow fdatasync"):
		ev.Kind, ev.Took, ev.Expected = EvSlowFdatasync, dur("took"), dur("expected-duration")
	case syncTextRe.MatchString(msg):
		m := syncTextRe.FindStringSubmatch(msg)
		ev.Kind = EvSlowFdatasync
		ev.Took, _ = time.ParseDuration(strings.ReplaceAll(m[1], " ", ""))
		ev.Expected, _ = time.ParseDuration(m[2])
	case applyRe.MatchString(msg):
		m := applyRe.FindStringSubmatch(msg)
		ev.Kind = EvApplySlow
		ev.Took, _ = time.ParseDuration(m[1])
	case strings.Contains(msg, "apply request took too long"):
		ev.Kind, ev.Took, ev.Expected = EvApplySlow, dur("took"), dur("expected-duration")
	case requestRe.MatchString(msg):
		m := requestRe.FindStringSubmatch(msg)
		ev.Kind = EvRequestSlow
		ev.Took, _ = time.ParseDuration(m[1])
	case leaderRe.MatchString(msg):
		m := leaderRe.FindStringSubmatch(msg)
		ev.Kind, ev.Lost = EvLeader, strings.HasPrefix(m[1], "lost")
		ev.Term, _ = strconv.Atoi(m[2])
	case campaignRe.MatchString(msg):
		m := campaignRe.FindStringSubmatch(msg)
		ev.Kind, ev.PreVote = EvCampaign, m[1] != ""
		ev.Term, _ = strconv.Atoi(m[2])
	case votersRe.MatchString(msg):
		ev.Kind, ev.Voters = EvVoters, len(strings.Fields(votersRe.FindStringSubmatch(msg)[1]))
	case startRe.MatchString(msg):
		ev.Kind = EvStart
	case fields != nil && str("remote-peer-id")+str("peer-id") != "" && (msg == "prober detected unhealthy status" || msg == "lost TCP streaming connection with remote peer" || strings.HasPrefix(msg, "peer became inactive") || msg == "failed to dial remote peer"):
		ev.Kind, ev.To, ev.Error = EvPeerDown, str("remote-peer-id")+str("peer-id"), str("error")
	case peerDownRe.MatchString(msg):
		m := peerDownRe.FindStringSubmatch(msg)
		ev.Kind = EvPeerDown
		for _, i := range []int{1, 3, 5, 6, 7} {
			if m[i] != "" {
				ev.To = m[i]
			}
		}
		ev.Error = m[2] + m[4]
	case cfgHbRe.MatchString(msg) || cfgElRe.MatchString(msg):
		ev.Kind = EvConfig
		if m := cfgHbRe.FindStringSubmatch(msg); m != nil {
			n, _ := strconv.Atoi(m[1])
			ev.Interval = time.Duration(n) * time.Millisecond
		}
		if m := cfgElRe.FindStringSubmatch(msg); m != nil {
			n, _ := strconv.Atoi(m[1])
			ev.Election = time.Duration(n) * time.Millisecond
		}
	case fields != nil && (fields["election-timeout"] != nil || fields["election-timeout-ms"] != nil):
		ev.Kind = EvConfig
		ev.Interval, ev.Election = dur("heartbeat-interval"), dur("election-timeout")
		if v, ok := fields["election-timeout-ms"].(float64); ok {
			ev.Election = time.Duration(v) * time.Millisecond
		}
		if v, ok := fields["heartbeat-interval-ms"].(float64); ok {
			ev.Interval = time.Duration(v) * time.Millisecond
		}
	default:
		return ev, format, false
	}
	return ev, format, true
}

func decodeObject(s string) map[string]any {
	var obj map[string]any
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if d.Decode(&obj) != nil {
		return nil
	}
	return normalizeNumbers(obj)
}

func normalizeNumbers(m map[string]any) map[string]any {
	for k, v := range m {
		switch x := v.(type) {
		case json.Number:
			f, _ := x.Float64()
			m[k] = f
		case map[string]any:
			m[k] = normalizeNumbers(x)
		}
	}
	return m
}

// findEtcdObject finds the object carrying etcd's "msg" (zap lines may be
// nested inside another program's JSON log).
func findEtcdObject(obj map[string]any) map[string]any {
	if _, ok := obj["msg"].(string); ok {
		return obj
	}
	for _, v := range obj {
		if m, ok := v.(map[string]any); ok {
			if f := findEtcdObject(m); f != nil {
				return f
			}
		}
	}
	return nil
}

func zapTime(v any) (time.Time, bool) {
	switch x := v.(type) {
	case string:
		return parseStamp(x)
	case float64: // epoch seconds (zap's default encoder)
		sec, frac := math.Modf(x)
		return time.Unix(int64(sec), int64(frac*1e9)).UTC(), true
	}
	return time.Time{}, false
}

// parseStamp reads an ISO 8601 stamp with a zone: Z, +08:00 or +0800.
func parseStamp(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999Z0700"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

func setNaive(ev *LogEvent, layout, s string, year bool) {
	if ev.HasTime { // a CRI stamp with a zone wins
		return
	}
	if t, err := time.Parse(layout, s); err == nil {
		ev.Time, ev.HasTime, ev.ZoneKnown, ev.YearKnown = t, true, false, year
	}
}
