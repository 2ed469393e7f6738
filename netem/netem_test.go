package netem

import (
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/internal/testenv"
	"golang.org/x/sys/unix"
)

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"25ms", 25 * time.Millisecond, ""},
		{"1.5ms", 1500 * time.Microsecond, ""},
		{"800us", 800 * time.Microsecond, ""},
		{"800usec", 800 * time.Microsecond, ""},
		{"250ns", 250, ""},
		{"2s", 2 * time.Second, ""},
		{"25", 0, "no unit"},
		{"0.5", 0, "no unit"},
		{"-5ms", 0, "negative"},
		{"fast", 0, "not a duration"},
		{"", 0, "empty"},
	} {
		got, err := ParseDuration(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseDuration(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParsePercentAndU32Scale(t *testing.T) {
	for _, tc := range []struct {
		in   string
		pct  float64
		u32  uint32
		fail bool
	}{
		// rint(p/100 * 4294967295), as iproute2's q_netem.c computes it.
		{"0.1%", 0.1, 4294967, false},
		{"25%", 25, 1073741824, false},
		{"100%", 100, math.MaxUint32, false},
		{"0%", 0, 0, false},
		{"1%", 1, 42949673, false},
		{"0.1", 0, 0, true},
		{"101%", 0, 0, true},
		{"-1%", 0, 0, true},
		{"x%", 0, 0, true},
	} {
		got, err := ParsePercent(tc.in)
		if tc.fail {
			if err == nil {
				t.Errorf("ParsePercent(%q) = %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.pct {
			t.Errorf("ParsePercent(%q) = %v, %v; want %v", tc.in, got, err, tc.pct)
			continue
		}
		if u := PercentToU32(got); u != tc.u32 {
			t.Errorf("PercentToU32(%v) = %d, want %d", got, u, tc.u32)
		}
		// tc prints 100*u/UINT32_MAX with %g: the round trip must give
		// back the percentage the user typed.
		if back := FormatPercent(U32ToPercent(PercentToU32(got))); back != tc.in {
			t.Errorf("round trip of %s printed %s", tc.in, back)
		}
	}
}

func TestFormatDurationExact(t *testing.T) {
	for d, want := range map[time.Duration]string{
		25 * time.Millisecond:   "25ms",
		1500 * time.Microsecond: "1500us",
		250:                     "250ns",
		25*time.Millisecond + 1: "25000001ns",
		3 * time.Second:         "3s",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%d) = %s, want %s", d, got, want)
		}
		back, err := ParseDuration(FormatDuration(d))
		if err != nil || back != d {
			t.Errorf("ParseDuration(FormatDuration(%d)) = %d, %v", d, back, err)
		}
	}
}

// readDist parses an iproute2 .dist file (comments, then integers).
func readDist(t *testing.T, path string) []int16 {
	b, err := os.ReadFile(path)
	if err != nil {
		testenv.Missing(t, fmt.Sprintf("no iproute2 table to compare with (apt-get install iproute2): %v", err))
	}
	var out []int16
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		for _, f := range strings.Fields(line) {
			v, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			out = append(out, int16(v))
		}
	}
	return out
}

func moments(tab []int16) (mean, sd, skew float64) {
	n := float64(len(tab))
	for _, v := range tab {
		mean += float64(v)
	}
	mean /= n
	var m2, m3 float64
	for _, v := range tab {
		d := float64(v) - mean
		m2 += d * d
		m3 += d * d * d
	}
	m2 /= n
	m3 /= n
	return mean, math.Sqrt(m2), m3 / math.Pow(m2, 1.5)
}

// quantileMoments integrates a quantile function q over (0,1) by the
// midpoint rule on a fine grid: the moments the 4096-entry table, a
// coarse sampling of the same quantile function, must reproduce.
func quantileMoments(q func(u float64) float64) (mean, sd float64) {
	const n = 1 << 20
	var s1, s2 float64
	for i := 0; i < n; i++ {
		v := q((float64(i) + .5) / n)
		s1 += v
		s2 += v * v
	}
	mean = s1 / n
	return mean, math.Sqrt(s2/n - mean*mean)
}

// clampedPareto is the quantile function pareto.c samples: a Pareto with
// shape 3 shifted by its mean 1.5 and scaled by 4/3 (so unclamped it has
// mean 0), in units of sigma/8192, clamped at 32767 (4 sigma; this cuts
// 1.1% of the mass, which is why the table's sd is 6715, not 9459).
func clampedPareto(u float64) float64 {
	return math.Min((math.Pow(u, -1.0/3)-1.5)*4/3*8192, 32767)
}

// TestDistTables checks the generated tables against the moments of the
// distributions they sample (numerically integrated from their quantile
// functions, an independent computation), and, where iproute2 is
// installed, entry by entry against the files tc loads.
func TestDistTables(t *testing.T) {
	normalQ := func(u float64) float64 { return math.Max(math.Sqrt2*math.Erfinv(2*u-1)*8192, -32768) }
	for _, tc := range []struct {
		name             string
		q                func(u float64) float64
		tolMean, tolSD   float64 // absolute, in table units
		skewMin, skewMax float64
	}{
		{DistNormal, normalQ, 20, 40, -0.02, 0.02},
		{DistPareto, clampedPareto, 30, 60, 2, 4},
		// .25 normal + .75 pareto at opposite ends of the same quantile
		// index, as paretonormal.c pairs them.
		{DistParetoNormal, func(u float64) float64 { return (normalQ(u) + 3*clampedPareto(1-u)) / 4 }, 30, 60, 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := DistTable(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if len(tab) != 4096 {
				t.Fatalf("%d entries, want 4096", len(tab))
			}
			mean, sd, skew := moments(tab)
			wm, wsd := quantileMoments(tc.q)
			t.Logf("%s: table mean %.1f sd %.1f skew %.3f; integrated mean %.1f sd %.1f (units of sigma/8192)", tc.name, mean, sd, skew, wm, wsd)
			if math.Abs(mean-wm) > tc.tolMean {
				t.Errorf("mean %.1f, want %.1f ± %.0f", mean, wm, tc.tolMean)
			}
			if math.Abs(sd-wsd) > tc.tolSD {
				t.Errorf("sd %.1f, want %.1f ± %.0f", sd, wsd, tc.tolSD)
			}
			if skew < tc.skewMin || skew > tc.skewMax {
				t.Errorf("skewness %.3f outside [%v, %v]", skew, tc.skewMin, tc.skewMax)
			}
			for _, dir := range []string{"/usr/lib/x86_64-linux-gnu/tc", "/usr/lib/tc", "/usr/lib64/tc"} {
				path := filepath.Join(dir, tc.name+".dist")
				if _, err := os.Stat(path); err != nil {
					continue
				}
				want := readDist(t, path)
				if !reflect.DeepEqual(tab, want) {
					diff := 0
					for i := range want {
						if i >= len(tab) || tab[i] != want[i] {
							diff++
						}
					}
					t.Errorf("%d of %d entries differ from %s", diff, len(want), path)
				} else {
					t.Logf("all %d entries equal %s", len(want), path)
				}
				return
			}
		})
	}
	if tab, err := DistTable(DistUniform); err != nil || tab != nil {
		t.Errorf("uniform: %v, %v; want no table", tab, err)
	}
	if _, err := DistTable("gamma"); err == nil {
		t.Errorf("unknown distribution accepted")
	}
}

func TestQueueLimit(t *testing.T) {
	for _, tc := range []struct {
		rate  uint64
		mtu   int
		delay time.Duration
		want  uint32
	}{
		{10e9, 1500, 25 * time.Millisecond, 20834}, // 10 Gbit/s * 25 ms / 1500 B = 20833.3
		{1e9, 1500, 45 * time.Millisecond, 3750},
		{100e6, 1500, 25 * time.Millisecond, 1000}, // 209 packets: netem's default floor
		{10e9, 9000, 100 * time.Millisecond, 13889},
	} {
		if got := QueueLimit(tc.rate, tc.mtu, tc.delay); got != tc.want {
			t.Errorf("QueueLimit(%d, %d, %s) = %d, want %d", tc.rate, tc.mtu, tc.delay, got, tc.want)
		}
	}
}

func TestSpecValidate(t *testing.T) {
	ok := Spec{Dev: "eth0", Peers: []netip.Addr{netip.MustParseAddr("::ffff:10.0.0.3"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")}, Delay: time.Millisecond}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if want := []netip.Addr{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")}; !reflect.DeepEqual(ok.Peers, want) {
		t.Errorf("peers normalised to %v, want %v (unmapped, sorted, unique)", ok.Peers, want)
	}
	if ok.Port != 2380 || ok.Classifier != ClassifierBPF || ok.Distribution != DistUniform {
		t.Errorf("defaults: port %d classifier %s distribution %s", ok.Port, ok.Classifier, ok.Distribution)
	}
	peer := []netip.Addr{netip.MustParseAddr("10.0.0.2")}
	for _, tc := range []struct {
		s    Spec
		want string
	}{
		{Spec{Peers: peer, Delay: 1}, "--dev"},
		{Spec{Dev: "e", Delay: 1}, "--peer"},
		{Spec{Dev: "e", Peers: peer}, "nothing to emulate"},
		{Spec{Dev: "e", Peers: peer, Delay: 1, Distribution: DistNormal}, "needs --jitter"},
		{Spec{Dev: "e", Peers: peer, Delay: 1, Jitter: 3 * time.Second}, "s32"},
		{Spec{Dev: "e", Peers: peer, Delay: 1, Classifier: "flower"}, "bpf or u32"},
		{Spec{Dev: "e", Peers: peer, Delay: 1, LossCorrelation: 5}, "needs --loss"},
	} {
		err := tc.s.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want error containing %q", tc.s, err, tc.want)
		}
	}
}

func TestCommandsDryRun(t *testing.T) {
	s := Spec{Dev: "eth0", Peers: []netip.Addr{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("fd00::2")},
		Delay: 25 * time.Millisecond, Jitter: 5 * time.Millisecond, JitterCorrelation: 25, Distribution: DistNormal,
		Loss: 0.1, LossCorrelation: 25, Classifier: ClassifierU32}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := s.Params(1e9, 1500)
	if err != nil {
		t.Fatal(err)
	}
	got := Commands(&s, p, false)
	want := []string{
		"tc qdisc add dev eth0 root handle 1: prio bands 4 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1",
		// limit: 1 Gbit/s * (25 + 4*5) ms / 1500 B = 3750 packets.
		"tc qdisc add dev eth0 parent 1:4 handle 40: netem limit 3750 delay 25ms 5ms 25% distribution normal loss random 0.1% 25%",
		"tc filter add dev eth0 parent 1: protocol ip pref 1 u32 match ip ihl 5 0xf match u16 0 0x1fff at 6 match ip protocol 6 0xff match ip dst 10.0.0.2/32 match ip dport 2380 0xffff flowid 1:4",
		"tc filter add dev eth0 parent 1: protocol ip pref 1 u32 match ip ihl 5 0xf match u16 0 0x1fff at 6 match ip protocol 6 0xff match ip dst 10.0.0.2/32 match ip sport 2380 0xffff flowid 1:4",
		"tc filter add dev eth0 parent 1: protocol ip pref 1 u32 match ip ihl 5 0xf match u16 0 0x1fff at 6 match ip protocol 17 0xff match ip dst 10.0.0.2/32 match ip dport 2380 0xffff flowid 1:4",
		"tc filter add dev eth0 parent 1: protocol ip pref 1 u32 match ip ihl 5 0xf match u16 0 0x1fff at 6 match ip protocol 17 0xff match ip dst 10.0.0.2/32 match ip sport 2380 0xffff flowid 1:4",
		"tc filter add dev eth0 parent 1: protocol ipv6 pref 2 u32 match ip6 protocol 6 0xff match ip6 dst fd00::2/128 match ip6 dport 2380 0xffff flowid 1:4",
		"tc filter add dev eth0 parent 1: protocol ipv6 pref 2 u32 match ip6 protocol 6 0xff match ip6 dst fd00::2/128 match ip6 sport 2380 0xffff flowid 1:4",
		"tc filter add dev eth0 parent 1: protocol ipv6 pref 2 u32 match ip6 protocol 17 0xff match ip6 dst fd00::2/128 match ip6 dport 2380 0xffff flowid 1:4",
		"tc filter add dev eth0 parent 1: protocol ipv6 pref 2 u32 match ip6 protocol 17 0xff match ip6 dst fd00::2/128 match ip6 sport 2380 0xffff flowid 1:4",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("dry run:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if p.LatencyNs != 25e6 || p.JitterNs != 5e6 || p.Loss != 4294967 || p.LossCorr != 1073741824 || p.DelayCorr != 1073741824 || len(p.DistTable) != 4096 {
		t.Errorf("params %+v", p)
	}
	s.Classifier = ClassifierBPF
	bpf := Commands(&s, p, true)
	if !strings.HasPrefix(bpf[0], "tc qdisc replace dev eth0 root") {
		t.Errorf("--replace dry run starts %q", bpf[0])
	}
	for _, l := range bpf[2:] {
		if !strings.HasPrefix(l, "#") {
			t.Errorf("bpf dry run has an uncommented filter line %q", l)
		}
	}
}

// TestU32KeysDecode checks that the keys etcdscope sends are described
// back in iproute2's words: the decoder show uses on any u32 tree.
func TestU32KeysDecode(t *testing.T) {
	s := Spec{Peers: []netip.Addr{netip.MustParseAddr("10.99.0.2"), netip.MustParseAddr("fd99::2")}, Port: 2380}
	var got []string
	for _, r := range u32Rules(&s) {
		got = append(got, describeU32(r.Proto, r.Keys))
	}
	want := []string{
		"ip ihl 5 and ip first-fragment and ip protocol tcp and ip dst 10.99.0.2 and dport 2380",
		"ip ihl 5 and ip first-fragment and ip protocol tcp and ip dst 10.99.0.2 and sport 2380",
		"ip ihl 5 and ip first-fragment and ip protocol udp and ip dst 10.99.0.2 and dport 2380",
		"ip ihl 5 and ip first-fragment and ip protocol udp and ip dst 10.99.0.2 and sport 2380",
		"ip6 nexthdr tcp and ip6 dst fd99::2 and dport 2380",
		"ip6 nexthdr tcp and ip6 dst fd99::2 and sport 2380",
		"ip6 nexthdr udp and ip6 dst fd99::2 and dport 2380",
		"ip6 nexthdr udp and ip6 dst fd99::2 and sport 2380",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDecodeNetemOptions(t *testing.T) {
	// A TCA_OPTIONS payload as sch_netem's netem_dump writes it: qopt with
	// ticks, then LATENCY64, JITTER64 and CORR attributes.
	p := Params{LatencyNs: 25_000_001, JitterNs: 5e6, Limit: 3750, Loss: 4294967, DelayCorr: 7, LossCorr: 9}
	b := make([]byte, 24)
	le := func(off int, v uint32) {
		b[off], b[off+1], b[off+2], b[off+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
	le(0, ticks(p.LatencyNs))
	le(4, p.Limit)
	le(8, p.Loss)
	le(20, ticks(p.JitterNs))
	attr := func(typ uint16, payload []byte) {
		l := 4 + len(payload)
		b = append(b, byte(l), byte(l>>8), byte(typ), byte(typ>>8))
		b = append(b, payload...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	u64 := func(v int64) []byte {
		out := make([]byte, 8)
		for i := range out {
			out[i] = byte(uint64(v) >> (8 * i))
		}
		return out
	}
	attr(1, []byte{7, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0})
	attr(10, u64(p.LatencyNs))
	attr(11, u64(p.JitterNs))
	got := decodeNetem(b)
	want := p
	want.DistTable = nil
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("decoded %+v, want %+v", *got, want)
	}
	if s := got.String(); s != "delay 25000001ns jitter 5ms (correlation 1.62981e-07%) loss 0.1% (correlation 2.09548e-07%) limit 3750 pkts" {
		t.Errorf("String() = %q", s)
	}
}

func TestStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := statePath(dir, 4026531840, "eth0")
	if st, err := readState(path); err != nil || st != nil {
		t.Fatalf("missing state: %v, %v", st, err)
	}
	s := Spec{Dev: "eth0", Peers: []netip.Addr{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("fd00::2")},
		Port: 2380, Delay: 25*time.Millisecond + 1, Jitter: 5 * time.Millisecond, Distribution: DistPareto,
		Loss: 0.1, LossCorrelation: 25, JitterCorrelation: 10, Classifier: ClassifierU32, Limit: 5000}
	in := &State{Version: stateVersion, Dev: "eth0", Ifindex: 7, NetnsIno: 4026531840, Spec: s,
		AppliedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
		Original:  &SavedQdisc{Kind: "tbf", Handle: 0x50000, Options: []byte{1, 2, 3, 0, 255}}}
	if err := writeState(path, in); err != nil {
		t.Fatal(err)
	}
	out, err := readState(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip:\n%+v\n%+v", in, out)
	}
	if err := os.WriteFile(path, []byte(`{"version": 99}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readState(path); err == nil || !strings.Contains(err.Error(), "version 99") {
		t.Errorf("future version accepted: %v", err)
	}
}

// TestReadStateRefusesNonRegular (issue 25): a state file that is a FIFO
// (no writer: the read blocked clear forever) or a device is refused
// within 5 s; one of more than maxStateBytes too.
func TestReadStateRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := statePath(dir, 1, "fifo0")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := statePath(dir, 1, "big0")
	if err := os.WriteFile(big, make([]byte, maxStateBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/zero", big} {
		done := make(chan error, 1)
		go func() { _, err := readState(p); done <- err }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: read as state", p)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: readState still blocked after 5 s", p)
		}
	}
}
