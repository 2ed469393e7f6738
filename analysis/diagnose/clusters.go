package diagnose

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// ClusterInputs is the evidence of one etcd cluster: the inputs that name
// it, or (Cluster "") those that name none when others name two or more.
type ClusterInputs struct {
	// Cluster: the cluster ID in hex as etcd prints it ("5709b776b6e25ffd"),
	// or a Prometheus series' cluster label as ClusterOf names it; "" for
	// inputs whose content names no cluster.
	Cluster string  `json:"cluster"`
	Inputs  []Input `json:"-"`
}

var (
	// zap: "cluster-id" on membership and server lines, and the local
	// member's in a cluster ID mismatch ("local-member-cluster-id"; the
	// remote's is another cluster's).
	zapClusterRe = regexp.MustCompile(`"(?:cluster-id|local-member-cluster-id)"\s*:\s*"([0-9a-f]{1,16})"`)
	// capnslog: "added member 4c29bc4c3c9734c8 [http://...] to cluster
	// 399d15c52b61633c", "published {Name:... ClientURLs:[...]} to cluster
	// 4284235894e3b979".
	capnslogClusterRe = regexp.MustCompile(`(?:(?:added|removed) member [0-9a-f]+ .*?|published \{.*?\} )(?:to|from) cluster ([0-9a-f]{1,16})\b`)
	// etcdctl endpoint status -w json: "header":{"cluster_id":17237436991929493444,...}.
	statusClusterRe = regexp.MustCompile(`"cluster_id"\s*:\s*([0-9]{1,20})`)
)

// InputCluster returns the cluster an input's content names: a cluster ID
// from an etcd log (zap or capnslog) or from etcdctl endpoint status JSON,
// or the cluster label (ClusterLabels) of a Prometheus API answer's
// series. "" when it names none (a /metrics scrape, fio output, a log
// excerpt without membership lines) or names more than one.
func InputCluster(in Input) string {
	if in.Err != nil || len(in.Data) == 0 {
		return ""
	}
	seen := map[string]bool{}
	for _, re := range []*regexp.Regexp{zapClusterRe, capnslogClusterRe} {
		for _, m := range re.FindAllSubmatch(in.Data, 64) {
			seen[strings.TrimLeft(string(m[1]), "0")] = true
		}
	}
	for _, m := range statusClusterRe.FindAllSubmatch(in.Data, 64) {
		if v, err := strconv.ParseUint(string(m[1]), 10, 64); err == nil {
			seen[strconv.FormatUint(v, 16)] = true
		}
	}
	if k, err := Detect(in.Data); err == nil && k == KindPromJSON {
		var ans struct {
			Data struct {
				Result []struct {
					Metric map[string]string `json:"metric"`
				} `json:"result"`
			} `json:"data"`
		}
		if json.Unmarshal(in.Data, &ans) == nil {
			for _, r := range ans.Data.Result {
				for _, l := range ClusterLabels {
					if v := r.Metric[l]; v != "" {
						seen[l+"="+strconv.Quote(v)] = true
						break
					}
				}
			}
		}
	}
	if len(seen) != 1 {
		return ""
	}
	for c := range seen {
		return c
	}
	return ""
}

// SplitClusters groups inputs by the cluster their content names
// (InputCluster), in the order the clusters first appear. With fewer than
// two clusters named, all inputs are one group (the evidence of one
// cluster, as it has always been read); with two or more, the inputs that
// name none form a group of their own (Cluster ""), diagnosed apart
// rather than joined to a guess.
func SplitClusters(inputs []Input) []ClusterInputs {
	var groups []ClusterInputs
	index := map[string]int{}
	var unnamed []Input
	for _, in := range inputs {
		c := InputCluster(in)
		if c == "" {
			unnamed = append(unnamed, in)
			continue
		}
		i, ok := index[c]
		if !ok {
			i = len(groups)
			index[c] = i
			groups = append(groups, ClusterInputs{Cluster: c})
		}
		groups[i].Inputs = append(groups[i].Inputs, in)
	}
	if len(groups) < 2 {
		name := ""
		if len(groups) == 1 {
			name = groups[0].Cluster
		}
		return []ClusterInputs{{Cluster: name, Inputs: inputs}}
	}
	if len(unnamed) > 0 {
		groups = append(groups, ClusterInputs{Inputs: unnamed})
	}
	return groups
}
