package analysis

import "strings"

// MissEffect is what a program's missed probe runs can do to a trace of
// calls (docs/metrics.md#missed-probe-runs has the table): hide a call,
// or only leave one of a counted call's layers short.
type MissEffect uint8

// The effects, the worst first.
const (
	// MissHidesCalls: a run of a call's own enter or exit (the fsync and
	// fdatasync syscalls, ext4_sync_file), or of a program not known to
	// be a layer's: the call may be uncounted, or its time short.
	MissHidesCalls MissEffect = iota
	// MissBlockLayers: a block_* program (a request's insert, issue or
	// completion): the call is counted; its block layers (block_queue,
	// device) may be short.
	MissBlockLayers
	// MissJournalLayers: a journal program (jbd2_*, xfs_log_force): the
	// call is counted; its journal time may be short.
	MissJournalLayers
	// MissLayers: programs of both the block layer and the journal.
	MissLayers
)

// ProgramMissEffect is what a missed run of the program of that name
// (event.ProgramStats' Name) can do.
func ProgramMissEffect(program string) MissEffect {
	switch {
	case strings.HasPrefix(program, "block_"):
		return MissBlockLayers
	case strings.HasPrefix(program, "jbd2_"), program == "xfs_log_force":
		return MissJournalLayers
	}
	return MissHidesCalls
}

// MissEffectOf is what the missed runs of progs can do together: the
// worst of their effects (MissHidesCalls when progs is empty: programs
// not known are counted as a call's).
func MissEffectOf(progs []MissedRuns) MissEffect {
	if len(progs) == 0 {
		return MissHidesCalls
	}
	e := ProgramMissEffect(progs[0].Program)
	for _, p := range progs[1:] {
		switch pe := ProgramMissEffect(p.Program); {
		case pe == MissHidesCalls:
			return MissHidesCalls
		case pe != e:
			e = MissLayers
		}
	}
	return e
}

// LayerMisses returns the programs of progs whose missed runs cannot hide
// a call (ProgramMissEffect not MissHidesCalls), in progs' order, and
// their runs summed.
func LayerMisses(progs []MissedRuns) ([]MissedRuns, uint64) {
	var out []MissedRuns
	var runs uint64
	for _, p := range progs {
		if ProgramMissEffect(p.Program) != MissHidesCalls {
			out, runs = append(out, p), runs+p.Runs
		}
	}
	return out, runs
}
