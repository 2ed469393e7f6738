// Command etcd is etcd v3.5 (go.etcd.io/etcd/server/v3 v3.5.x, pinned in
// go.mod), built the same way as tools/etcd: a tiny main that calls
// etcdmain.Main. etcdscope's commit tests run against it too, so that a
// function etcd renamed between v3.5 and v3.6 shows up as a failing test.
// Build it with `make etcd35` (-> bin/etcd35, a position-independent
// executable: the commit tests' PIE case).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
