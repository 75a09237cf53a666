#!/usr/bin/env bash
# Build the test control plane from Go modules, once, into a user cache keyed by the versions:
#   tests/kubeenv/build.sh            # prints the bin directory on stdout when done
#   KUBEENV_ONLY="etcd kube-apiserver" tests/kubeenv/build.sh   # a subset
# Modules (go.mod and go.sum are committed; nothing prebuilt is downloaded, only Go modules):
#   k8s/     etcd (etcdmain), kube-apiserver, kube-controller-manager, kube-scheduler at Kubernetes 1.33
#   addons/  KWOK (fake nodes and pods) and Kueue's controller manager (0.19.2, as generator/catalog.py pins)
#   helm/    helm v4 (renders the bundle's releases from ../shared/charts)
# Cache: ${ORCHGEN_KUBEENV_CACHE:-${XDG_CACHE_HOME:-~/.cache}/orchgen/kubeenv}/<k8s version>-<go.sum hash>/bin.
# A binary already there is not rebuilt; builds run under `nice` and a lock (parallel runs wait).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
k8s_version=$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$here/k8s/go.mod")
# the key covers this script too (the link flags below are part of what is built)
key=$(cat "$here"/*/go.mod "$here"/*/go.sum "$here/build.sh" | sha256sum | cut -c1-12)
cache="${ORCHGEN_KUBEENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/orchgen/kubeenv}"
bin="$cache/$k8s_version-$key/bin"
mkdir -p "$bin"
exec 9>"$cache/.lock"
flock 9

# module:binary:package
targets=(
  "k8s:etcd:./cmd/etcd"
  "k8s:kube-apiserver:k8s.io/kubernetes/cmd/kube-apiserver"
  "k8s:kube-scheduler:k8s.io/kubernetes/cmd/kube-scheduler"
  "k8s:kube-controller-manager:k8s.io/kubernetes/cmd/kube-controller-manager"
  "addons:kwok:sigs.k8s.io/kwok/cmd/kwok"
  "addons:kueue:sigs.k8s.io/kueue/cmd/kueue"
  "helm:helm:helm.sh/helm/v4/cmd/helm"
)
for t in "${targets[@]}"; do
  IFS=: read -r mod name pkg <<<"$t"
  if [[ -n "${KUBEENV_ONLY:-}" && " $KUBEENV_ONLY " != *" $name "* ]]; then continue; fi
  [[ -x "$bin/$name" ]] && continue
  start=$SECONDS
  echo "kubeenv: building $name ($pkg) in $mod/" >&2
  ldflags=()
  if [[ "$mod" == k8s && "$name" != etcd ]]; then
    # what Kubernetes' own build (hack/lib/version.sh) stamps: without it /version says v0.0.0-master,
    # which Kueue refuses to parse ("Unable to setup server version fetcher")
    minor=${k8s_version#v1.}; minor=${minor%%.*}
    ldflags=(-ldflags "-X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean")
  fi
  (cd "$here/$mod" && nice -n 10 go build "${ldflags[@]}" -o "$bin/.$name.tmp" "$pkg")
  mv "$bin/.$name.tmp" "$bin/$name"
  echo "kubeenv: built $name in $((SECONDS - start)) s" >&2
done
# KWOK's stages (how a fake node and pod move through their lifecycle) are YAML in its module, not in
# the binary's defaults: take the "fast" node stage and the pod stages that make a bound pod Ready and
# Running and let it be deleted. Not pod-complete: it would end every Job's pods at once, while the
# starters' pods must stay Running for the tests to see where they are placed.
stages="$bin/../kwok-stages"
if [[ ! -f "$stages/pod-ready.yaml" && ( -z "${KUBEENV_ONLY:-}" || " $KUBEENV_ONLY " == *" kwok "* ) ]]; then
  src=$(cd "$here/addons" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage
  mkdir -p "$stages"
  cp "$src/node/fast/node-initialize.yaml" "$src/pod/fast/pod-ready.yaml" "$src/pod/fast/pod-delete.yaml" "$stages/"
  chmod 644 "$stages"/*.yaml
fi
echo "$bin"
