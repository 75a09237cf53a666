#!/usr/bin/env bash
# Set up everything the tests need on a fresh Debian 12 machine, then run them.
#   ./scripts/test.sh [pytest args...]
# Installs (when run as root and missing): Debian's Slurm 22.05 + munge (the real controller the
# Slurm tests boot on loopback), slurmdbd + MariaDB (real accounting: the tests start private
# instances and never use the packages' services), debootstrap (newer Slurm in cached chroots and the
# bring-up's bare hosts), the shell linter shellcheck, docker-registry (a real OCI registry on loopback
# that `validate` pulls charts from in tests/test_validate_fetch.py), openssh-client (the bring-up) and
# openssl (the test control plane's certificates); then a virtualenv in .venv with orchgen and its test
# consumers (pulumi, kubectl, kubernetes-validate ...).
set -euo pipefail
cd "$(dirname "$0")/.."

# ../shared (the upstream charts, the reference data, Pulumi's sources) sits beside the checkout. A clone made
# elsewhere from a local repository (`git clone -q . /tmp/cc`) finds it beside the repository it was cloned from;
# ORCHGEN_CHARTS, ORCHGEN_REFERENCE and ORCHGEN_PULUMI_SRC, when set, name each part instead.
if [ ! -d ../shared ]; then
  origin=$(git config --get remote.origin.url 2>/dev/null || true)
  if [ -n "$origin" ] && [ -d "$origin/../shared" ]; then
    shared_dir=$(cd "$origin/../shared" && pwd)
    echo "note: no ../shared beside this clone: using $shared_dir (beside $origin, the repository it was cloned from)" >&2
    export ORCHGEN_CHARTS="${ORCHGEN_CHARTS:-$shared_dir/charts}"
    export ORCHGEN_REFERENCE="${ORCHGEN_REFERENCE:-$shared_dir/reference}"
    export ORCHGEN_PULUMI_SRC="${ORCHGEN_PULUMI_SRC:-$shared_dir/pulumi-src}"
  fi
fi

# The time of each setup phase, printed at the end and kept for .ci/run's budget line
# (ORCHGEN_PHASE_TIMES: a file of "<seconds> <phase>" lines).
phase_file="${ORCHGEN_PHASE_TIMES:-$(mktemp)}"
: >"$phase_file"
phase_start=$SECONDS
phase() {  # phase NAME: the time since the last call is NAME's
  echo "$((SECONDS - phase_start)) $1" >>"$phase_file"
  phase_start=$SECONDS
}

apt_packages=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server debootstrap shellcheck docker-registry openssh-client openssl)
missing=()
for pkg in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "note: not root, so not installing ${missing[*]}: the tests that need them will skip" >&2
  fi
fi

# --- issue 26: Slurm bring-up tests (tests/test_bringup_real.py) -----------------------------------------
# bare Debian hosts from debootstrap roots, reached over SSH: the client here, sshd inside each root
# (debootstrap installs that one); ansible-core, pulumi-command and pulumi-random come with .[test] below.
for pkg in openssh-client debootstrap; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    if [ "$(id -u)" = 0 ]; then
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null
    else
      echo "note: not root, so not installing $pkg: the bring-up tests will skip" >&2
    fi
  fi
done
# --- end issue 26 ------------------------------------------------------------------------------------------
phase "apt packages"

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
# stacks/requirements.txt is the Pulumi program's pin set (pulumi, pulumi-kubernetes, PyYAML); the tests
# run with exactly those versions (test_pulumi_stack checks it), so a newer release on PyPI can't break them.
.venv/bin/python -m pip install -q -e '.[test]' -c stacks/requirements.txt
.venv/bin/python -c "import generator, pulumi, pulumi_kubernetes, kubernetes_validate, jsonschema" 
# --- issue 33: the end-to-end tests run the installed product, not the source tree ---------------------------
# The wheel as `pip install .` builds it, installed into a fresh venv of its own (.venv-wheel; its dependencies
# from PyPI or pip's cache, pinned like .venv's by stacks/requirements.txt); the tests run its `orchgen`
# (ORCHGEN_BIN, tests/support.py orchgen_argv), so a module or data file missing from the wheel fails them.
rm -rf .venv-wheel build/wheel build/lib  # build/lib: a stale module there would ship
.venv/bin/python -m pip wheel -q --no-deps -w build/wheel .  # isolated build, as `pip install .`
python3 -m venv .venv-wheel
.venv-wheel/bin/python -m pip install -q build/wheel/orchgen-*.whl -c stacks/requirements.txt
rm -rf build/wheel
export ORCHGEN_BIN="$PWD/.venv-wheel/bin/orchgen"
# --- end issue 33 ------------------------------------------------------------------------------------------
# helm (for `helm template` of the pinned charts: plan --diff's rollouts, taints, the charts' tests):
.venv/bin/python scripts/install_helm.py
phase "venvs (tests; the wheel's), pip, helm"


# --- begin issue 27: the real Kubernetes control plane of the tests (tests/kubeenv) ---
# etcd, kube-apiserver, kube-scheduler, kube-controller-manager (Kubernetes 1.33), KWOK, Kueue 0.19.2 and
# helm, built from Go modules by tests/kubeenv/build.sh into ~/.cache/orchgen/kubeenv/<version>-<hash>/
# (cold: see tests/kubeenv/README.md for the time; afterwards nothing to do). openssl makes its certificates.
if ! command -v openssl >/dev/null && [ "$(id -u)" = 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssl >/dev/null
fi
# Only what the selected tests need (issue 32): with test files named on the command line, the control
# plane and LWS are built when one of them uses tests/kubeenv, Flux when one of them runs Flux; with no
# file named (the whole suite, -k, -m), everything. All three builds share Go's module and build caches
# (GOMODCACHE, GOCACHE: Go's defaults, never overridden here), so a package built for one is not rebuilt.
need_kube=1 need_flux=1 need_volcano=1
selected=()
for arg in "$@"; do
  path="${arg%%::*}"
  [[ "$arg" != -* && -e "$path" ]] && selected+=("$path")
done
if [ ${#selected[@]} -gt 0 ] && ! [ -n "$(find "${selected[@]}" -maxdepth 0 -type d 2>/dev/null)" ]; then
  grep -qs "kubeenv" "${selected[@]}" || need_kube=0
  grep -qs "flux_bin_dir\|start_flux" "${selected[@]}" || need_flux=0
  grep -qs "volcano=" "${selected[@]}" || need_volcano=0
fi
if ! command -v go >/dev/null; then
  echo "note: no go on PATH, so the test control plane is not built: tests/test_kube_real.py will skip" >&2
elif [ $need_kube = 1 ]; then
  tests/kubeenv/build.sh >/dev/null
  # LeaderWorkerSet's controller manager (tests/test_lws_real.py and every bundle with an lws release), a
  # separate small build (cold: about 3 CPU-minutes, tests/kubeenv/README.md) that leaves the one above
  # and its cache key alone
  tests/kubeenv/lws/build.sh >/dev/null
  # the NetworkPolicy engine of the tenant-wall tests (tests/tenant_walls.py: Cyclonus's matcher), small
  # (cold: about 1.5 CPU-minutes)
  tests/kubeenv/netpol/build.sh >/dev/null
  # Volcano's scheduler, controller manager and admission webhook server (the volcano examples of
  # tests/test_kube_real.py), only when a selected test runs Volcano (cold: see tests/kubeenv/README.md)
  if [ $need_volcano = 1 ]; then tests/kubeenv/volcano/build.sh >/dev/null; fi
  # Flux's source-, kustomize- and helm-controller (tests/test_flux_real.py: the Flux delivery path for
  # real), another separate build (cold: about 11 CPU-minutes, tests/kubeenv/README.md)
  if [ $need_flux = 1 ]; then tests/kubeenv/flux/build.sh >/dev/null; fi
fi
# --- end issue 27 ---
# --- issue 38: Prometheus's promtool (tests/test_promtool_real.py: the bundles' scrape configs, alert rules and
# dashboard queries, and the alerts' behaviour under `promtool test rules`), built from Go modules by
# tests/promtool/build.sh into ~/.cache/orchgen/promtool/<version>-<hash>/ (cold: tests/promtool/README.md has the
# time; afterwards nothing to do), only when a selected test file uses it, as above
need_promtool=1
if [ ${#selected[@]} -gt 0 ] && ! [ -n "$(find "${selected[@]}" -maxdepth 0 -type d 2>/dev/null)" ]; then
  grep -qs "promtool.binary\|from tests import promtool" "${selected[@]}" || need_promtool=0
fi
if ! command -v go >/dev/null; then
  echo "note: no go on PATH, so promtool is not built: tests/test_promtool_real.py will skip" >&2
elif [ $need_promtool = 1 ]; then
  tests/promtool/build.sh >/dev/null
fi
# --- end issue 38 ---
phase "Go builds (control plane, LWS, Volcano, Flux, promtool)"

# --- issue 33: a real Pulumi toolchain (tests/test_pulumi_up_real.py runs `pulumi up` for real) -------------
# No prebuilt Pulumi binary is reachable here: ../shared/pulumi-src/build.sh builds the CLI, the Python language
# host and the command and random providers from source (its README: minutes cold on 2 cores) into
# ~/.cache/orchgen/pulumi/<CLI version>/bin, kept between runs (build.sh skips what is there). Only when a selected
# test file uses it (ORCHGEN_PULUMI_BIN), as above, and under `nice`: the build is CPU-bound and the rest of the run
# should not wait on its share. pulumi-resource-kubernetes v4.25.0 (`--kubernetes`: about 6.5 min and 442 MB more)
# only when a selected file runs the Kubernetes program (tests/test_pulumi_kube_real.py names that plugin).
pulumi_src="${ORCHGEN_PULUMI_SRC:-../shared/pulumi-src}"
pulumi_out="${ORCHGEN_PULUMI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/orchgen/pulumi}/v3.276.0"
need_pulumi=1 pulumi_kubernetes=--kubernetes
if [ ${#selected[@]} -gt 0 ] && ! [ -n "$(find "${selected[@]}" -maxdepth 0 -type d 2>/dev/null)" ]; then
  grep -qs "ORCHGEN_PULUMI_BIN" "${selected[@]}" || need_pulumi=0
  grep -qs "pulumi-resource-kubernetes" "${selected[@]}" || pulumi_kubernetes=
fi
if [ $need_pulumi = 1 ]; then
  if ! command -v go >/dev/null || [ ! -x "$pulumi_src/build.sh" ]; then
    echo "note: no go or no $pulumi_src/build.sh, so no Pulumi toolchain: tests/test_pulumi_up_real.py will skip" >&2
  else
    nice "$pulumi_src/build.sh" "$pulumi_out" $pulumi_kubernetes >/dev/null
    export ORCHGEN_PULUMI_BIN="$pulumi_out/bin"
  fi
fi
# --- end issue 33 ------------------------------------------------------------------------------------------
phase "Pulumi toolchain (CLI, Python host, command, random and kubernetes providers)"

# Parallel by default (issue 32): N workers (ORCHGEN_TEST_WORKERS, default 3 on this 2-core machine: the
# real-consumer tests mostly wait on their daemons), modules that share a fixture kept on one worker and
# the slow ones sent first (tests/conftest.py). `-n 0` (or -p no:xdist) runs everything in one process.
parallel=(-n "${ORCHGEN_TEST_WORKERS:-3}" --dist loadgroup --no-loadscope-reorder)
for arg in "$@"; do
  case "$arg" in -n|-n*|--numprocesses*|no:xdist) parallel=() ;; esac
done
set +e
.venv/bin/python -m pytest "${parallel[@]}" "$@"
rc=$?
set -e
phase "pytest"
echo "scripts/test.sh: time per phase (s):" >&2
while read -r seconds name; do printf '  %6d  %s\n' "$seconds" "$name" >&2; done <"$phase_file"
exit $rc
