// Package node turns deploy/'s DaemonSet into the static pod a kubelet runs
// from its manifest directory, for `make node-test` (node_test.go, build tag
// nodetest), which brings up a single control-plane node laid out as
// kubeadm does: containerd, runc, a kubelet and static pods for etcd and
// etcdscope.
package node

import (
	"bytes"
	"fmt"
	"reflect"

	"gopkg.in/yaml.v3"
)

// DroppedSpecFields are the pod spec fields a static pod cannot keep, and
// why. Nothing else of the DaemonSet's pod template may change: the
// containers are copied as they are (TestStaticPodFromDaemonSet).
var DroppedSpecFields = map[string]string{
	// The API server refuses a mirror pod that names a service account,
	// and a standalone kubelet has none to resolve.
	"serviceAccountName": "static pods cannot reference a ServiceAccount",
	"serviceAccount":     "static pods cannot reference a ServiceAccount",
	// A static pod is placed by the file; the kubelet's admission still
	// checks nodeSelector against its own labels, and it cannot give itself
	// node-role.kubernetes.io/control-plane (--node-labels refuses that prefix).
	"nodeSelector": "placement is by the manifest directory, not the scheduler",
	"affinity":     "placement is by the manifest directory, not the scheduler",
}

// StaticPod returns the static pod for the DaemonSet in a multi-document
// manifest: kind Pod, the DaemonSet's name and namespace, the template's
// labels and annotations, and the template's spec without
// DroppedSpecFields.
func StaticPod(manifest []byte) (map[string]any, error) {
	meta, tmeta, tspec, err := template(manifest)
	if err != nil {
		return nil, err
	}
	podMeta := map[string]any{"name": meta["name"], "namespace": meta["namespace"]}
	for _, k := range []string{"labels", "annotations"} {
		if v, ok := tmeta[k]; ok {
			podMeta[k] = v
		}
	}
	podSpec := map[string]any{}
	for k, v := range tspec {
		if _, drop := DroppedSpecFields[k]; !drop {
			podSpec[k] = v
		}
	}
	return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": podMeta, "spec": podSpec}, nil
}

// TemplateSpec returns the DaemonSet's spec.template.spec as decoded.
func TemplateSpec(manifest []byte) (map[string]any, error) {
	_, _, tspec, err := template(manifest)
	return tspec, err
}

// template returns the DaemonSet's metadata, its pod template's metadata
// and its pod template's spec.
func template(manifest []byte) (meta, tmeta, tspec map[string]any, err error) {
	ds, err := daemonSet(manifest)
	if err != nil {
		return nil, nil, nil, err
	}
	meta, _ = ds["metadata"].(map[string]any)
	spec, _ := ds["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	tmeta, _ = tmpl["metadata"].(map[string]any)
	tspec, ok := tmpl["spec"].(map[string]any)
	if !ok {
		return nil, nil, nil, fmt.Errorf("daemonset %v: no spec.template.spec", meta["name"])
	}
	return meta, tmeta, tspec, nil
}

// SpecChanges lists what a static pod's spec changed from the DaemonSet's
// template: fields removed, added or different (a copied container must
// compare equal).
func SpecChanges(tmpl, pod map[string]any) (removed, changed []string) {
	for k, v := range tmpl {
		pv, ok := pod[k]
		switch {
		case !ok:
			removed = append(removed, k)
		case !reflect.DeepEqual(v, pv):
			changed = append(changed, k)
		}
	}
	for k := range pod {
		if _, ok := tmpl[k]; !ok {
			changed = append(changed, k)
		}
	}
	return removed, changed
}

func daemonSet(manifest []byte) (map[string]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(manifest))
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			return nil, fmt.Errorf("no DaemonSet in manifest: %w", err)
		}
		if doc["kind"] == "DaemonSet" {
			return doc, nil
		}
	}
}
