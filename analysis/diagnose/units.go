package diagnose

import (
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
)

// The units the findings' numbers are written in, shared with render/
// (which words the typed findings): a duration, a bucket estimate, a log
// time. Numbers with their unit, no sentences.

// FormatDuration rounds a duration to 3 significant digits for the tables
// (fio prints ns: 6.651904ms reads as 6.65ms).
func FormatDuration(d time.Duration) string {
	for r := time.Duration(1); r < time.Second; r *= 10 {
		if d < 1000*r {
			return d.Round(r).String()
		}
	}
	return d.Round(time.Millisecond).String()
}

// FormatEstimate writes a quantile estimated from histogram buckets: its
// value when interpolated, else the bucket bound it is known by ("≤10ms",
// ">1s"; "?" when nothing bounds it, "-" when there is none).
func FormatEstimate(e *etcdmetric.Estimate) string {
	switch {
	case e == nil:
		return "-"
	case e.Interpolated:
		return fmtSec(e.Value)
	case e.Unbounded && e.Lo == 0:
		return "?"
	case e.Unbounded:
		return ">" + fmtSec(e.Lo)
	}
	return "≤" + fmtSec(e.Hi)
}

// FormatStamp writes a log line's time as far as its format gives it: no
// year for syslog, " (zone unknown)" for a time without a zone.
func FormatStamp(t time.Time, has, zone, year bool) string {
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
