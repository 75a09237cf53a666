"""A real Kubernetes control plane for the tests, built from Go modules by tests/kubeenv/build.sh.

`cluster.Cluster` starts etcd, kube-apiserver, kube-scheduler, kube-controller-manager, KWOK and
(on demand) Kueue on loopback, as controller-runtime's envtest does; `fixture` holds the pytest
fixtures. See tests/kubeenv/README.md.
"""
