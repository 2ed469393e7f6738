package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/pipeline"
	"github.com/etcdscope/etcdscope/render"
)

func init() {
	subcommands["cluster"] = subcommand{
		summary: "each write followed across the members (their serve --commit-pid agents): the deciding follower's network, queueing and WAL append",
		run:     runCluster,
	}
}

// clusterStdout is where the report goes (tests capture it).
var clusterStdout io.Writer = os.Stdout

func runCluster(args []string) error {
	var members []string
	var since uint64
	var timeout time.Duration
	var output string
	fs := newFlagSet("cluster")
	fs.StringSliceVar(&members, "members", nil, "every member's etcdscope serve --commit-pid (with --etcd-endpoints) base URL, comma-separated, e.g. http://10.0.0.1:10380")
	fs.Uint64Var(&since, "since-index", 0, "only Raft entries above this index (0: every entry the agents keep, their last 4096)")
	fs.DurationVar(&timeout, "timeout", 5*time.Second, "bound on each request to an agent")
	fs.StringVar(&output, "output", "table", "table, or json (one record per write, then a cluster_summary)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errHelp
		}
		return usagef("%v (see 'etcdscope cluster --help')", err)
	}
	if err := emptyFlags(fs, "members"); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return unexpectedArg(fs)
	case len(members) < 2:
		return usagef("--members: give the serve --commit-pid URL of every member, at least 2 (a one-member cluster has no follower's vote: etcdscope commit splits its writes)")
	case timeout <= 0:
		return usagef("--timeout %v: give a positive duration, e.g. 5s", timeout)
	case output != "table" && output != "json":
		return usagef("--output %q: use table or json", output)
	}
	seen := map[string]bool{}
	for _, m := range members {
		if err := checkURL(m); err != nil {
			return usagef("--members %v", err)
		}
		u, _ := url.Parse(m)
		if strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
			return usagef("--members %q: give the agent's base URL, its serve --listen address, e.g. %s://%s", m, u.Scheme, u.Host)
		}
		key := strings.ToLower(u.Scheme + "://" + u.Host)
		if seen[key] {
			return usagef("--members: %s is given twice: give each member's agent once", m)
		}
		seen[key] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout*time.Duration(len(members)*2))
	defer cancel()
	windows, err := pipeline.FetchEntryWindows(ctx, members, since, timeout)
	switch {
	case errors.Is(err, pipeline.ErrNotAgent):
		return usagef("--members %v: give each member's serve --listen URL, serve started with --commit-pid and --etcd-endpoints", err)
	case errors.Is(err, pipeline.ErrAgentUnreachable):
		return usagef("--members %v: is serve --commit-pid running there, and is that its --listen address?", err)
	case err != nil:
		return err
	}
	j := commit.JoinCluster(windows)
	if output == "json" {
		enc := json.NewEncoder(render.JSONText(clusterStdout))
		for i := range j.Writes {
			if err := enc.Encode(render.ClusterWriteRecord{Type: "cluster_write", ClusterWrite: j.Writes[i]}); err != nil {
				return err
			}
		}
		return enc.Encode(render.ClusterSummaryOf(&j))
	}
	return render.ClusterTable(clusterStdout, &j)
}
