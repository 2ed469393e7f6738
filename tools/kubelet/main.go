// Command kubelet is the Kubernetes kubelet built from the Go module proxy
// (k8s.io/kubernetes at the version pinned in go.mod) for `make node-test`.
// k8s.io/kubernetes points its k8s.io/* requirements at ./staging, so this
// module replaces each of them with the published v0.x.y of the same release.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
