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


# --- begin issue 27: the real Kubernetes control plane of the tests (tests/kubeenv) ---
# etcd, kube-apiserver, kube-scheduler, kube-controller-manager (Kubernetes 1.33), KWOK, Kueue 0.19.2 and
# helm, built from Go modules by tests/kubeenv/build.sh into ~/.cache/orchgen/kubeenv/<version>-<hash>/
# (cold: see tests/kubeenv/README.md for the time; afterwards nothing to do). openssl makes its certificates.
if ! command -v openssl >/dev/null && [ "$(id -u)" = 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssl >/dev/null
fi
if command -v go >/dev/null; then
  tests/kubeenv/build.sh >/dev/null
  # LeaderWorkerSet's controller manager (tests/test_lws_real.py), a separate small build (cold: about
  # 3 CPU-minutes, tests/kubeenv/README.md) that leaves the one above and its cache key alone
  tests/kubeenv/lws/build.sh >/dev/null
  # Flux's source-, kustomize- and helm-controller (tests/test_flux_real.py: the Flux delivery path for
  # real), another separate build (cold: about 11 CPU-minutes, tests/kubeenv/README.md)
  tests/kubeenv/flux/build.sh >/dev/null
else
  echo "note: no go on PATH, so the test control plane is not built: tests/test_kube_real.py will skip" >&2
fi
# --- end issue 27 ---

exec .venv/bin/python -m pytest "$@"
