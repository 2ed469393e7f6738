package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/jsonl"
	"github.com/etcdscope/etcdscope/analysis/merge"
	"github.com/etcdscope/etcdscope/internal/safefile"
	"github.com/etcdscope/etcdscope/render"
)

func init() {
	subcommands["merge"] = subcommand{
		summary: "join a guest fsync recording with the hypervisor's: per-flush split guest | virtualization | host",
		run:     runMerge,
	}
}

func runMerge(args []string) error {
	var guestPath, hostPath, output string
	var opt merge.Options
	fs := newFlagSet("merge")
	fs.SortFlags = false
	fs.StringVar(&guestPath, "guest", "", "the guest's recording: etcdscope fsync --output json, run inside the VM")
	fs.StringVar(&hostPath, "host", "", "the host's recording: etcdscope hypervisor --output json, run on the QEMU process")
	fs.StringVar(&opt.GuestDev, "guest-dev", "", "only guest fsyncs on this device (e.g. vda) when the guest recording has several")
	fs.StringVar(&opt.Image, "image", "", "only this image file's host flushes when the hypervisor has several")
	fs.StringVar(&output, "output", "table", "table, or json (one merged_fsync record per guest fsync, then a merge_summary; docs/merge.md)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errHelp
		}
		return usagef("%v (see 'etcdscope merge --help')", err)
	}
	switch {
	case fs.NArg() > 0:
		return usagef("unexpected argument %q (see 'etcdscope merge --help')", fs.Arg(0))
	case guestPath == "" || hostPath == "":
		return usagef("give both --guest g.jsonl and --host h.jsonl")
	case output != "table" && output != "json":
		return usagef("--output %q: use table or json", output)
	}
	gf, err := safefile.OpenInput(guestPath)
	if err != nil {
		return usagef("--guest: %v: give a recording from etcdscope fsync --output json", err)
	}
	defer gf.Close()
	// Two passes over the guest recording: the first keeps what the clock
	// fit needs (merge.GuestIndex: the flush requests and where each call
	// is), the second reads each call again as its merged record is made.
	guest := merge.NewGuestIndex(opt)
	_, err = analysis.ScanJSONLSpans(bufio.NewReaderSize(gf, 1<<20), func(r *analysis.FsyncRecord, at jsonl.Span) error {
		return guest.Add(r, at)
	}, nil)
	switch {
	case errors.Is(err, merge.ErrGuestTooLarge):
		return usagef("--guest %s: %v: merge a part of it at a time (jq -c 'select(.start_ns < T)' cuts it by time)", guestPath, err)
	case errors.Is(err, analysis.ErrHypervisorRecording):
		return usagef("--guest %s is a hypervisor recording (etcdscope hypervisor --output json): give it as --host, and the guest's etcdscope fsync --output json as --guest", guestPath)
	case err != nil:
		return usagef("--guest %s: %v: give a recording from etcdscope fsync --output json, run in the guest", guestPath, err)
	}
	hf, err := safefile.OpenInput(hostPath)
	if err != nil {
		return usagef("--host: %v: give a recording from etcdscope hypervisor --output json", err)
	}
	defer hf.Close()
	host, err := merge.ScanHost(bufio.NewReaderSize(hf, 1<<20))
	switch {
	case errors.Is(err, merge.ErrHostTooLarge):
		return usagef("--host %s: %v: merge a part of both recordings at a time (cut them by time)", hostPath, err)
	case err != nil:
		return usagef("--host %s: %v: give a recording from etcdscope hypervisor --output json", hostPath, err)
	}
	var images []merge.Image
	if host.Summary != nil {
		images = host.Summary.Images
	}
	// Several devices on either side: the user must say which pair.
	if devs, more := guest.Devices(); opt.GuestDev == "" && len(devs) > 1 {
		return usagef("the guest recording has fsyncs on %s: pick one with --guest-dev", listSome(devs, more))
	} else if opt.GuestDev != "" && guest.Calls() == 0 && len(devs) > 0 {
		return usagef("--guest-dev %s: the guest recording has no fsyncs on it, only on %s", opt.GuestDev, listSome(devs, more))
	}
	if paths := mergeCandidates(host, images); opt.Image != "" && len(paths) > 0 && !slices.Contains(paths, opt.Image) {
		return usagef("--image %s: the hypervisor wrote or flushed no such file, only %s", opt.Image, listSome(paths, false))
	}
	if opt.Image == "" {
		// Every image written or flushed is a candidate, not only the
		// flushed ones: an image under cache=unsafe is written and never
		// flushed, and fitting its guest to another image's flushes
		// "matches" by chance.
		if paths := mergeCandidates(host, images); len(paths) > 1 {
			return usagef("the hypervisor wrote or flushed %s: pick the guest disk's image with --image", listSome(paths, false))
		}
	}
	var enc *json.Encoder
	if output == "json" {
		enc = json.NewEncoder(render.JSONText(os.Stdout))
	}
	var z merge.Summarizer
	var buf []byte
	res, err := guest.Merge(host, func(at jsonl.Span) (r analysis.FsyncRecord, err error) {
		r, buf, err = analysis.FsyncAt(gf, at, buf)
		if err != nil {
			return r, fmt.Errorf("--guest %s: %w", guestPath, err)
		}
		return r, nil
	}, func(m *merge.MergedFsync) error {
		z.Add(m)
		if enc != nil {
			return enc.Encode(m)
		}
		return nil
	})
	if errors.Is(err, merge.ErrNothingToMerge) {
		return usagef("%v: give the guest's etcdscope fsync --output json and the host's etcdscope hypervisor --output json of the same VM and time", err)
	}
	if err != nil {
		return err
	}
	sum := z.Summary(res, images, opt.Image)
	if enc != nil {
		render.WordMerge(&sum)
		return enc.Encode(&sum)
	}
	return render.Merge(os.Stdout, &sum)
}

// listSome joins up to 8 names for a one-line message, saying when there
// are more (more: beyond names too).
func listSome(names []string, more bool) string {
	const show = 8
	if len(names) > show {
		names, more = names[:show], true
	}
	s := strings.Join(names, ", ")
	if more {
		s += " and more"
	}
	return s
}

// mergeCandidates lists the images the host recording wrote or flushed,
// from its summary or, for a recording cut short, from its records.
func mergeCandidates(host *merge.HostIndex, images []merge.Image) []string {
	if images == nil {
		images = host.Images()
	}
	var out []string
	for _, im := range images {
		if im.Writes+im.IOSubmits+im.IOUringReqs+im.Flushes > 0 {
			out = append(out, im.Path)
		}
	}
	sort.Strings(out)
	return out
}
