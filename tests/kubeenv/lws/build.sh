#!/usr/bin/env bash
# Build LeaderWorkerSet's controller manager for the test harness, once, into the kubeenv cache:
#   tests/kubeenv/lws/build.sh        # prints the binary's path on stdout when done
# A step of its own, beside tests/kubeenv/build.sh (which it does not touch: its module here is
# module/, one folder deeper than the tests/kubeenv/*/go.mod that build.sh hashes, so the Kubernetes
# and Kueue binaries keep their cache key). Only Go modules are downloaded; nothing prebuilt.
# Version: sigs.k8s.io/lws v0.9.0, its main package sigs.k8s.io/lws/cmd (the image's /manager). The
# catalog pins the lws chart v0.10.0, but the Go module proxy refuses v0.10.0's source
# ("403 Forbidden: This module version is not available"; its .info and .mod are served), so the
# controller is the newest release whose source it serves (tests/kubeenv/README.md).
# Cache: ${ORCHGEN_KUBEENV_CACHE:-${XDG_CACHE_HOME:-~/.cache}/orchgen/kubeenv}/lws-<version>-<hash of
# module/go.mod, module/go.sum and this script>/bin/lws-manager. Built under `nice` and the same lock.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version=$(awk '$1 == "require" && $2 == "sigs.k8s.io/lws" {print $3; exit} $1 == "sigs.k8s.io/lws" {print $2; exit}' "$here/module/go.mod")
key=$(cat "$here/module/go.mod" "$here/module/go.sum" "$here/build.sh" | sha256sum | cut -c1-12)
cache="${ORCHGEN_KUBEENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/orchgen/kubeenv}"
bin="$cache/lws-$version-$key/bin"
mkdir -p "$bin"
exec 9>"$cache/.lock"
flock 9
if [[ ! -x "$bin/lws-manager" ]]; then
  start=$SECONDS
  echo "kubeenv: building lws-manager (sigs.k8s.io/lws/cmd $version) in lws/module/" >&2
  (cd "$here/module" && nice -n 10 go build -o "$bin/.lws-manager.tmp" sigs.k8s.io/lws/cmd)
  mv "$bin/.lws-manager.tmp" "$bin/lws-manager"
  echo "kubeenv: built lws-manager in $((SECONDS - start)) s" >&2
fi
echo "$bin/lws-manager"
