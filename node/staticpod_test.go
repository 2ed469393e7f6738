package node

import (
	"os"
	"slices"
	"testing"
)

// TestStaticPodFromDaemonSet: the static pod make node-test runs is the
// DaemonSet's pod template with only DroppedSpecFields removed, its
// containers (image, args, securityContext, probes, mounts) unchanged. If
// the node test needs another change to run etcdscope, deploy/ is what is
// wrong and this fails.
func TestStaticPodFromDaemonSet(t *testing.T) {
	for _, f := range []string{"../deploy/daemonset.yaml", "../deploy/daemonset-netem.yaml"} {
		t.Run(f, func(t *testing.T) {
			manifest, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			tmpl, err := TemplateSpec(manifest)
			if err != nil {
				t.Fatal(err)
			}
			pod, err := StaticPod(manifest)
			if err != nil {
				t.Fatal(err)
			}
			if pod["kind"] != "Pod" {
				t.Fatalf("kind %v", pod["kind"])
			}
			removed, changed := SpecChanges(tmpl, pod["spec"].(map[string]any))
			if len(changed) > 0 {
				t.Errorf("pod spec fields changed from the DaemonSet's template: %v", changed)
			}
			for _, k := range removed {
				if _, ok := DroppedSpecFields[k]; !ok {
					t.Errorf("pod spec field %q removed, and a static pod does not require it", k)
				}
			}
			if len(removed) == 0 || !slices.Contains(removed, "serviceAccountName") {
				t.Errorf("removed %v: want serviceAccountName among them", removed)
			}
		})
	}
}
