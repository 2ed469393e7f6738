package render

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
)

// The units numbers are written in: seconds, a duration, a bucket
// estimate, a log time (they were analysis/diagnose's and etcdmetric's
// until only render used them).

// formatSeconds formats seconds with a unit kernel engineers read at a
// glance: µs below 1 ms, ms with two decimals below 1 s, else s.
func formatSeconds(s float64) string {
	switch {
	case math.IsInf(s, 1):
		return "∞"
	case s == 0:
		return "0"
	case s < 1e-3:
		return strconv.FormatFloat(s*1e6, 'f', 0, 64) + "µs"
	case s < 1:
		return strconv.FormatFloat(s*1e3, 'f', 2, 64) + "ms"
	}
	return strconv.FormatFloat(s, 'f', 3, 64) + "s"
}

// formatDuration rounds a duration to 3 significant digits for the tables
// (fio prints ns: 6.651904ms reads as 6.65ms).
func formatDuration(d time.Duration) string {
	for r := time.Duration(1); r < time.Second; r *= 10 {
		if d < 1000*r {
			return d.Round(r).String()
		}
	}
	return d.Round(time.Millisecond).String()
}

// formatEstimate writes a quantile estimated from histogram buckets: its
// value when interpolated, else the bucket bound it is known by ("≤10ms",
// ">1s"; "?" when nothing bounds it, "-" when there is none).
func formatEstimate(e *etcdmetric.Estimate) string {
	switch {
	case e == nil:
		return "-"
	case e.Interpolated:
		return formatSeconds(e.Value)
	case e.Unbounded && e.Lo == 0:
		return "?"
	case e.Unbounded:
		return ">" + formatSeconds(e.Lo)
	}
	return "≤" + formatSeconds(e.Hi)
}

// formatStamp writes a log line's time as far as its format gives it: no
// year for syslog, " (zone unknown)" for a time without a zone.
func formatStamp(t time.Time, has, zone, year bool) string {
	if !has {
		return "(no time)"
	}
	s := t.Format("2006-01-02 15:04:05.000")
	if !year {
		s = t.Format("Jan _2 15:04:05")
	}
	if zone {
		return s + "Z"
	}
	return s + " (zone unknown)"
}

// Ms formats ns as milliseconds with three decimals ("1.234"), the
// resolution at which fio and etcd's buckets are read.
func Ms(ns int64) string { return fmt.Sprintf("%.3f", float64(ns)/1e6) }
