package tracer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/etcdscope/etcdscope/event"
)

// Bounds of SwitchToExt4's handover (handover).
const (
	// switchGrace: after the syscall enter programs are detached, a run
	// of one begun just before (a few µs of BPF) has ended by then.
	switchGrace = 20 * time.Millisecond
	// switchPoll: how often the calls the syscall exits still owe are
	// read while waiting for them.
	switchPoll = 5 * time.Millisecond
	// SwitchWait bounds the wait for those calls: ext4's are taken over
	// at once (their ext4_sync_file_enter) or recorded at their syscall
	// exit within microseconds; only a call on another filesystem hung
	// in the kernel outlasts it, and is counted in Lost.
	SwitchWait = 2 * time.Second
)

// ErrNotSwitchable: SwitchToExt4 on a tracer not loaded with
// FsyncConfig.SwitchLater (or already on ext4's tracepoints, or on a
// kernel without them).
var ErrNotSwitchable = errors.New("the fsync tracer cannot move to ext4's tracepoints")

// CanSwitchToExt4 says whether SwitchToExt4 would move the calls: the
// tracer was loaded with FsyncConfig.SwitchLater on a kernel with ext4's
// sync_file tracepoints (and bpf_task_pt_regs), and its syscall
// tracepoints are still attached.
func (t *FsyncTracer) CanSwitchToExt4() bool {
	t.sysMu.Lock()
	defer t.sysMu.Unlock()
	return t.switchable && !t.sysClosed && len(t.sysEnter) > 0
}

// SwitchToExt4 moves the traced processes' fsync and fdatasync calls
// from the syscall tracepoints to ext4's sync_file tracepoints, while the
// tracer runs, and detaches the four syscall tracepoints: from then on
// the tracer taxes no other process's syscalls. The caller knows the
// traced files are on ext4 (a call on another filesystem is not seen
// after it). Every call is recorded once across it, in the one ring
// (bpf/call.h): ext4's programs take over the calls the syscall
// tracepoint started (their start and enter record kept) and record them
// at ext4's exit; the syscall exits record the others (a call on another
// filesystem) and stay attached until none is owed, for SwitchWait at
// most. It returns how many such calls were still in flight then
// (stranded: counted in Lost, never recorded). ctx ending first returns
// its error with the syscall exits still attached (Close detaches them).
func (t *FsyncTracer) SwitchToExt4(ctx context.Context) (stranded uint64, err error) {
	if !t.CanSwitchToExt4() {
		return 0, ErrNotSwitchable
	}
	on, ok := t.stacked.Variables["callers_on"]
	if !ok {
		return 0, fmt.Errorf("%w: no callers_on in the stacked object", ErrNotSwitchable)
	}
	n, err := handover(ctx, handoverSteps{
		takeOver: func() error { return on.Set(true) },
		closeEnters: func() error {
			return t.closeSyscalls(func() []link.Link { l := t.sysEnter; t.sysEnter = nil; return l }, "sys_enter_")
		},
		owed: t.owed,
		closeExits: func() error {
			return t.closeSyscalls(func() []link.Link { l := t.sysExit; t.sysExit = nil; return l }, "sys_exit_")
		},
	}, switchGrace, switchPoll, SwitchWait)
	t.stranded.Add(n)
	return n, err
}

// closeSyscalls detaches the syscall tracepoints take returns (under
// sysMu) and drops the probes named with prefix from Probes.
func (t *FsyncTracer) closeSyscalls(take func() []link.Link, prefix string) error {
	t.sysMu.Lock()
	if t.sysClosed {
		t.sysMu.Unlock()
		return ErrClosed
	}
	ls := take()
	t.probes = slices.DeleteFunc(slices.Clone(t.probes), func(p event.Probe) bool {
		return strings.HasPrefix(p.Name, "tracepoint/syscalls/"+prefix)
	})
	t.sysMu.Unlock()
	return errors.Join(closeLinks(ls)...)
}

// owed reads sys_calls: the calls started on the syscall tracepoint not
// yet recorded nor taken over by ext4's enter.
func (t *FsyncTracer) owed() (int64, error) {
	var n int64
	if err := t.fsync.SysCalls.Lookup(uint32(0), &n); err != nil {
		return 0, fmt.Errorf("reading sys_calls: %w", err)
	}
	return n, nil
}

// handoverSteps are SwitchToExt4's moves, separate so that their order
// and bounds are tested without BPF (switch_test.go).
type handoverSteps struct {
	takeOver    func() error          // ext4's programs start taking the calls
	closeEnters func() error          // detach the syscall enter tracepoints
	owed        func() (int64, error) // calls the syscall exits still owe
	closeExits  func() error          // detach the syscall exit tracepoints
}

// handover runs s: ext4's programs take the calls before the syscall
// enters go (so that no call starts unseen), then, once the enters'
// last runs are over (grace), it waits for the calls the exits owe,
// reading them every poll, for wait at most, and detaches the exits. It
// returns the calls still owed at the wait's end (stranded), or ctx's
// error when it ended first (the exits then left attached).
func handover(ctx context.Context, s handoverSteps, grace, poll, wait time.Duration) (stranded uint64, err error) {
	if err := s.takeOver(); err != nil {
		return 0, fmt.Errorf("enabling ext4's programs for the calls: %w", err)
	}
	if err := s.closeEnters(); err != nil {
		return 0, fmt.Errorf("detaching the syscall enter tracepoints: %w", err)
	}
	sleep := func(d time.Duration) error {
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tm.C:
			return nil
		}
	}
	if err := sleep(grace); err != nil {
		return 0, err
	}
	deadline := time.Now().Add(wait)
	for {
		n, err := s.owed()
		if err != nil {
			return 0, err
		}
		if n <= 0 {
			break
		}
		if !time.Now().Before(deadline) {
			stranded = uint64(n)
			break
		}
		if err := sleep(poll); err != nil {
			return 0, err
		}
	}
	if err := s.closeExits(); err != nil {
		return stranded, fmt.Errorf("detaching the syscall exit tracepoints: %w", err)
	}
	return stranded, nil
}
