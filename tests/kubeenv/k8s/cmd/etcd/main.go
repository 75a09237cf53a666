// Command etcd is etcd's own server main (go.etcd.io/etcd/server/v3/etcdmain), built at the version
// Kubernetes 1.33 itself is tested against (k8s.io/kubernetes v1.33.13 go.mod: etcd v3.5.21).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
