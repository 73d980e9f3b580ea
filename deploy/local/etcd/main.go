// etcd, as go.etcd.io/etcd/v3's own main runs it (etcdmain.Main), from the published module.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
