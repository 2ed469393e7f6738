package netem

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseDuration parses a delay or jitter such as "25ms", "1.5ms", "800us"
// or "250ns" into a time.Duration (nanoseconds, as netem's LATENCY64 and
// JITTER64 hold it). A bare number is refused: its unit differs between
// tools (Chaos Mesh #4545 passes it on as nanoseconds), so it must be explicit.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty duration (give a unit, e.g. 25ms)")
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return 0, fmt.Errorf("%q has no unit: write %sms, %sus or %sns", s, s, s, s)
	}
	d, err := time.ParseDuration(strings.ReplaceAll(s, "usec", "us"))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 25ms or 800us", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return d, nil
}

// ParsePercent parses "0.1%" into 0.1 (percent, 0 to 100). The % sign is
// required so that 0.1 (a fraction?) and 0.1% (a percent) cannot be mixed up.
func ParsePercent(s string) (float64, error) {
	s = strings.TrimSpace(s)
	num, ok := strings.CutSuffix(s, "%")
	if !ok {
		return 0, fmt.Errorf("%q needs a %% sign, e.g. %s%%", s, s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a percentage such as 0.1%%", s)
	}
	if v < 0 || v > 100 {
		return 0, fmt.Errorf("%q is outside 0%% to 100%%", s)
	}
	return v, nil
}

// PercentToU32 maps a percentage (0 to 100) onto the kernel's u32 scale for
// netem probabilities and correlations, where 100% is UINT32_MAX: the same
// rint(percent/100 * UINT32_MAX) that iproute2's q_netem.c set_percent does.
func PercentToU32(pct float64) uint32 {
	return uint32(math.RoundToEven(pct / 100 * math.MaxUint32))
}

// U32ToPercent is the inverse of PercentToU32, as tc prints it.
func U32ToPercent(v uint32) float64 {
	return 100 * float64(v) / math.MaxUint32
}

// ParseRate parses a bit rate such as "10gbit", "1000mbit" or "800kbit"
// (tc's spelling, decimal prefixes) into bits per second.
func ParseRate(s string) (uint64, error) {
	ls := strings.ToLower(strings.TrimSpace(s))
	mult := map[string]float64{"gbit": 1e9, "mbit": 1e6, "kbit": 1e3, "bit": 1}
	for _, suf := range []string{"gbit", "mbit", "kbit", "bit"} {
		if num, ok := strings.CutSuffix(ls, suf); ok {
			v, err := strconv.ParseFloat(num, 64)
			if err != nil || v <= 0 || math.IsInf(v, 0) {
				break
			}
			return uint64(v * mult[suf]), nil
		}
	}
	return 0, fmt.Errorf("%q is not a rate such as 10gbit or 800mbit", s)
}

// FormatDuration prints d in the largest of s, ms, us or ns that shows it
// exactly, in the form both people and tc(8) read ("25ms", "1500us").
func FormatDuration(d time.Duration) string {
	ns := int64(d)
	switch {
	case ns == 0:
		return "0ms"
	case ns%1e9 == 0:
		return fmt.Sprintf("%ds", ns/1e9)
	case ns%1e6 == 0:
		return fmt.Sprintf("%dms", ns/1e6)
	case ns%1e3 == 0:
		return fmt.Sprintf("%dus", ns/1e3)
	}
	return fmt.Sprintf("%dns", ns)
}

// FormatPercent prints a percentage with up to 6 significant digits, as
// tc prints netem's u32 probabilities ("0.1%", "25%").
func FormatPercent(pct float64) string {
	return strconv.FormatFloat(pct, 'g', 6, 64) + "%"
}

func durationNs(ns int64) time.Duration { return time.Duration(ns) }
