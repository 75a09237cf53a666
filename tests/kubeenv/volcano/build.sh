#!/usr/bin/env bash
# Build Volcano's scheduler, controller manager and admission webhook server for the test harness, once,
# into the kubeenv cache:
#   tests/kubeenv/volcano/build.sh    # prints the bin directory on stdout when done
# A step of its own, beside tests/kubeenv/build.sh (which it does not touch: its module is module/, one
# folder deeper than the tests/kubeenv/*/go.mod that build.sh hashes). Only Go modules are downloaded.
# Version: volcano.sh/volcano v1.14.1, not the v1.15.1 of the volcano chart generator/catalog.py pins.
# Volcano's go.mod takes its API types (volcano.sh/apis) from its own staging/ folder, which the module
# zip leaves out (a nested module), so a dependent module needs the published volcano.sh/apis. The Go
# module proxy serves volcano.sh/volcano v1.15.1 but refuses volcano.sh/apis v1.15.0 and v1.15.1 ("403
# Forbidden: This module version is not available"), and v1.15.1 does not compile against v1.14.0
# (undefined: schedulingv1beta1.QueueAllocationGateKey). v1.14.1 compiles against volcano.sh/apis v1.14.0,
# the newest the proxy serves (tests/kubeenv/README.md). Its main packages cmd/scheduler,
# cmd/controller-manager and cmd/webhook-manager are the images vc-scheduler, vc-controller-manager and
# vc-webhook-manager the chart deploys.
# Cache: ${ORCHGEN_KUBEENV_CACHE:-${XDG_CACHE_HOME:-~/.cache}/orchgen/kubeenv}/volcano-<version>-<hash of
# module/go.mod, module/go.sum and this script>/bin/. Built under `nice` and the kubeenv lock.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version=$(awk '$1 == "require" && $2 == "volcano.sh/volcano" {print $3; exit} $1 == "volcano.sh/volcano" {print $2; exit}' "$here/module/go.mod")
key=$(cat "$here/module/go.mod" "$here/module/go.sum" "$here/build.sh" | sha256sum | cut -c1-12)
cache="${ORCHGEN_KUBEENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/orchgen/kubeenv}"
bin="$cache/volcano-$version-$key/bin"
mkdir -p "$bin"
exec 9>"$cache/.lock"
flock 9
for name in scheduler controller-manager webhook-manager; do
  if [[ ! -x "$bin/vc-$name" ]]; then
    start=$SECONDS
    echo "kubeenv: building vc-$name (volcano.sh/volcano/cmd/$name $version) in volcano/module/" >&2
    (cd "$here/module" && nice -n 10 go build -o "$bin/.vc-$name.tmp" "volcano.sh/volcano/cmd/$name")
    mv "$bin/.vc-$name.tmp" "$bin/vc-$name"
    echo "kubeenv: built vc-$name in $((SECONDS - start)) s" >&2
  fi
done
echo "$bin"
