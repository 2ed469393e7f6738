package commit

// Target is what became of the traced etcd process during a run: whether
// it exited (the run stops then) and when it was stopped (SIGSTOP, a
// debugger). Times are from the start of the run's window.
type Target struct {
	PID int `json:"pid"`
	// Exited: the process was seen gone (or a zombie, or its pid reused)
	// ExitedAfterNs into the run, to within the watch's 100 ms.
	Exited        bool  `json:"exited"`
	ExitedAfterNs int64 `json:"exited_after_ns,omitempty"`
	// Stops are the periods it spent stopped, in order; the last is
	// Ongoing when it was still stopped at the end of the run.
	Stops []Stop `json:"stops,omitempty"`
}

// Stop is one period a process spent stopped, seen to within the
// watch's 100 ms.
type Stop struct {
	AfterNs int64 `json:"after_ns"` // from the start of the run
	Ns      int64 `json:"ns"`       // how long
	Ongoing bool  `json:"ongoing,omitempty"`
}

// StoppedAtEnd reports whether the process was still stopped at the end
// of the run (its last stop Ongoing).
func (t *Target) StoppedAtEnd() bool {
	return len(t.Stops) > 0 && t.Stops[len(t.Stops)-1].Ongoing
}

// StoppedNs is the time the process spent stopped.
func (t *Target) StoppedNs() int64 {
	var n int64
	for _, s := range t.Stops {
		n += s.Ns
	}
	return n
}
