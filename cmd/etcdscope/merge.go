package main

import (
	"encoding/json"
	"errors"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/etcdscope/etcdscope/analysis"
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
	guest, _, err := analysis.ReadJSONL(gf)
	if err != nil {
		return usagef("--guest %s: %v: give a recording from etcdscope fsync --output json, run in the guest", guestPath, err)
	}
	hf, err := safefile.OpenInput(hostPath)
	if err != nil {
		return usagef("--host: %v: give a recording from etcdscope hypervisor --output json", err)
	}
	defer hf.Close()
	host, err := merge.ReadHost(hf)
	if err != nil {
		return usagef("--host %s: %v: give a recording from etcdscope hypervisor --output json", hostPath, err)
	}
	var images []merge.Image
	if host.Summary != nil {
		images = host.Summary.Images
	}
	// Several devices on either side: the user must say which pair.
	if opt.GuestDev == "" {
		if devs := distinct(guest, func(r analysis.FsyncRecord) string { return r.DevName }); len(devs) > 1 {
			return usagef("the guest recording has fsyncs on %s: pick one with --guest-dev", strings.Join(devs, ", "))
		}
	}
	if opt.Image == "" {
		// Every image written or flushed is a candidate, not only the
		// flushed ones: an image under cache=unsafe is written and never
		// flushed, and fitting its guest to another image's flushes
		// "matches" by chance.
		if paths := mergeCandidates(host, images); len(paths) > 1 {
			return usagef("the hypervisor wrote or flushed %s: pick the guest disk's image with --image", strings.Join(paths, ", "))
		}
	}
	res, err := merge.Merge(guest, host, opt)
	if err != nil {
		return err
	}
	sum := merge.Summarize(res, images, opt.Image)
	if output == "json" {
		enc := json.NewEncoder(render.JSONText(os.Stdout))
		for i := range res.Fsyncs {
			if err := enc.Encode(&res.Fsyncs[i]); err != nil {
				return err
			}
		}
		return enc.Encode(&sum)
	}
	return render.Merge(os.Stdout, &sum)
}

func distinct(recs []analysis.FsyncRecord, key func(analysis.FsyncRecord) string) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range recs {
		if k := key(r); !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// mergeCandidates lists the images the host recording wrote or flushed,
// from its summary or, for a recording cut short, from its records.
func mergeCandidates(host merge.HostRecording, images []merge.Image) []string {
	if images == nil {
		images = merge.Images(host.IO, host.Fsyncs, nil, nil)
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
