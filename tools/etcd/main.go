// Command etcd is the etcd server that etcdscope's tests run against: the
// release pinned in go.mod (go.etcd.io/etcd/server/v3 v3.6.16, the newest
// v3.6.x on the Go module proxy when pinned), built from the proxy.
//
// It exists because `go install go.etcd.io/etcd/server/v3@v3.6.16` fails:
// etcd's own modules carry replace directives, which `go install pkg@version`
// refuses. A module of our own whose main calls etcdmain.Main builds the same
// server without them. It is a separate module so etcd's large dependency
// graph stays out of etcdscope's go.mod. Build it with `make etcd`
// (-> bin/etcd); `bin/etcd --version` prints the pinned version.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
