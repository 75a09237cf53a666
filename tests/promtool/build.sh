#!/usr/bin/env bash
# Build Prometheus's promtool for the telemetry tests (tests/test_promtool_real.py), once, into the orchgen cache:
#   tests/promtool/build.sh       # prints the binary's path on stdout when done
# Version: github.com/prometheus/prometheus v0.314.0, the Go module of Prometheus v3.14.0 (Prometheus 3.x tags
# v3.N.P as module version v0.3NN.P), because that is the Prometheus the bundles deploy: the catalog's
# kube-prometheus-stack 88.5.3 runs prometheus/prometheus:v3.14.0 (its values.yaml, prometheus.prometheusSpec.image).
# Its main package github.com/prometheus/prometheus/cmd/promtool, the same command the release tarball ships. Only
# Go modules are downloaded; nothing prebuilt. Cold: see tests/promtool/README.md for the time.
# Cache: ${ORCHGEN_PROMTOOL_CACHE:-${XDG_CACHE_HOME:-~/.cache}/orchgen/promtool}/<version>-<hash of module/go.mod,
# module/go.sum and this script>/promtool (tests/promtool/__init__.py computes the same path). Built under `nice`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version=$(awk '$1 == "require" && $2 == "github.com/prometheus/prometheus" {print $3; exit}' "$here/module/go.mod")
key=$(cat "$here/module/go.mod" "$here/module/go.sum" "$here/build.sh" | sha256sum | cut -c1-12)
cache="${ORCHGEN_PROMTOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/orchgen/promtool}"
bin="$cache/$version-$key"
mkdir -p "$bin"
exec 9>"$cache/.lock"
flock 9
if [[ ! -x "$bin/promtool" ]]; then
  start=$SECONDS
  echo "promtool: building github.com/prometheus/prometheus/cmd/promtool $version in tests/promtool/module/" >&2
  (cd "$here/module" && nice -n 10 go build -o "$bin/.promtool.tmp" github.com/prometheus/prometheus/cmd/promtool)
  mv "$bin/.promtool.tmp" "$bin/promtool"
  echo "promtool: built in $((SECONDS - start)) s" >&2
fi
echo "$bin/promtool"
