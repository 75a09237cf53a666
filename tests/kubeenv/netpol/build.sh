#!/usr/bin/env bash
# Build the NetworkPolicy engine of the tenant-wall tests (tests/tenant_walls.py), once, into the kubeenv cache:
#   tests/kubeenv/netpol/build.sh     # prints the binary's path on stdout when done
# module/main.go is a small command around Cyclonus's matcher (github.com/mattfenwick/cyclonus v0.5.6,
# pkg/matcher), the NetworkPolicy model SIG Network's conformance probing compares CNIs against: given the
# policies as the API server stored them, the namespaces' labels and pod-to-pod probes, it answers allowed or
# not for each. A step of its own beside tests/kubeenv/build.sh (its module is one folder deeper than the
# tests/kubeenv/*/go.mod that build.sh hashes, so the control plane keeps its cache key). Only Go modules
# are downloaded; nothing prebuilt. Cold: about 1.5 CPU-minutes.
# Cache: ${ORCHGEN_KUBEENV_CACHE:-${XDG_CACHE_HOME:-~/.cache}/orchgen/kubeenv}/netpol-<version>-<hash of
# module/go.mod, module/go.sum, module/main.go and this script>/bin/netpol-verdict. Built under `nice` and
# the same lock.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version=$(awk '$1 == "require" && $2 == "github.com/mattfenwick/cyclonus" {print $3; exit} $1 == "github.com/mattfenwick/cyclonus" {print $2; exit}' "$here/module/go.mod")
key=$(cat "$here/module/go.mod" "$here/module/go.sum" "$here/module/main.go" "$here/build.sh" | sha256sum | cut -c1-12)
cache="${ORCHGEN_KUBEENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/orchgen/kubeenv}"
bin="$cache/netpol-$version-$key/bin"
mkdir -p "$bin"
exec 9>"$cache/.lock"
flock 9
if [[ ! -x "$bin/netpol-verdict" ]]; then
  start=$SECONDS
  echo "kubeenv: building netpol-verdict (github.com/mattfenwick/cyclonus $version pkg/matcher) in netpol/module/" >&2
  (cd "$here/module" && nice -n 10 go build -o "$bin/.netpol-verdict.tmp" .)
  mv "$bin/.netpol-verdict.tmp" "$bin/netpol-verdict"
  echo "kubeenv: built netpol-verdict in $((SECONDS - start)) s" >&2
fi
echo "$bin/netpol-verdict"
