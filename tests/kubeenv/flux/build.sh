#!/usr/bin/env bash
# Build Flux's source-controller, kustomize-controller and helm-controller for the test harness, once,
# into the kubeenv cache:
#   tests/kubeenv/flux/build.sh        # prints the bin directory on stdout when done
# A step of its own, beside tests/kubeenv/build.sh and lws/build.sh (which it does not touch: its
# modules are source/, kustomize/ and helm/ here, one folder deeper than the tests/kubeenv/*/go.mod that
# build.sh hashes). Only Go modules are downloaded; nothing prebuilt.
# Versions (tests/kubeenv/README.md): Flux v2.9.3's source-controller v1.9.3 and kustomize-controller
# v1.9.4, and helm-controller v1.6.2 (v1.6.3's helm fork is refused by the proxy). Each module is the
# controller's own go.mod at that tag (same dependency versions), so each is built as upstream builds it.
# Also go-containerregistry's in-memory OCI registry (cmd/registry, from source/'s module, where it is
# already a dependency): it serves the bundle's OCI charts on loopback (tests/kubeenv/overlay.py).
# Cache: ${ORCHGEN_KUBEENV_CACHE:-${XDG_CACHE_HOME:-~/.cache}/orchgen/kubeenv}/flux-<hash of the three
# go.mod/go.sum and this script>/bin/{source,kustomize,helm}-controller and oci-registry. Built under
# `nice` and the lock.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
key=$(cat "$here"/{source,kustomize,helm}/go.{mod,sum} "$here/build.sh" | sha256sum | cut -c1-12)
cache="${ORCHGEN_KUBEENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/orchgen/kubeenv}"
bin="$cache/flux-$key/bin"
mkdir -p "$bin"
exec 9>"$cache/.lock"
flock 9
for c in source kustomize helm; do
  if [[ ! -x "$bin/$c-controller" ]]; then
    start=$SECONDS
    version=$(awk -v m="github.com/fluxcd/$c-controller" '$1 == "require" && $2 == m {print $3; exit}' "$here/$c/go.mod")
    echo "kubeenv: building $c-controller (github.com/fluxcd/$c-controller $version) in flux/$c/" >&2
    (cd "$here/$c" && nice -n 10 go build -o "$bin/.$c-controller.tmp" "github.com/fluxcd/$c-controller")
    mv "$bin/.$c-controller.tmp" "$bin/$c-controller"
    echo "kubeenv: built $c-controller in $((SECONDS - start)) s" >&2
  fi
done
if [[ ! -x "$bin/oci-registry" ]]; then
  (cd "$here/source" && nice -n 10 go build -o "$bin/.oci-registry.tmp" github.com/google/go-containerregistry/cmd/registry)
  mv "$bin/.oci-registry.tmp" "$bin/oci-registry"
fi
echo "$bin"
