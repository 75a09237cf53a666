"""What the bundle turns on that the bring-up cannot install, why, and the operator's exact steps: one
record each, printed by the bring-up (vars.yaml `orchgen_not_installed`, site.yml) and by the bundle
README (bringup.md.j2), so the two never disagree and nothing is skipped silently.

- enroot: not packaged by Debian or Ubuntu (`apt-cache search enroot` finds nothing on Debian 12/13);
  NVIDIA ships it as .deb files on GitHub releases only (NVIDIA/enroot doc/installation.md), and the
  bring-up installs from the OS's package archive only.
- pyxis: not packaged either; NVIDIA/pyxis builds from source (README "Installation": `make install`)
  against the installed Slurm's spank.h, which Debian ships in libslurm-dev (/usr/include/slurm/spank.h,
  the same 22.05/24.11 release as slurmd); its source is on GitHub only.
- the Kubernetes pool's nodes of a hybrid plan: the bring-up sets up Slurm hosts only. k3s and RKE2 install
  from their own scripts and binaries on get.k3s.io / get.rke2.io (no Debian package), and an upstream
  cluster is the operator's own (kubeadm or another installer): the steps of the k3s and RKE2
  quick-start guides, or the join to the operator's cluster, then the context for pulumi/.
"""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan
from ..kubernetes.common import slices
from ..slurm.model import model

# enroot's release the steps pin: the one NVIDIA's installation doc and Soperator's image scripts install
# (https://github.com/NVIDIA/enroot/releases; nebius/soperator images/common/scripts/install_enroot.sh)
ENROOT_VERSION = "3.5.0"
# pyxis needs enroot >= 3.1.0 (NVIDIA/pyxis README, "Installation")
PYXIS_REPO = "https://github.com/NVIDIA/pyxis"


# nccl-tests, for the production check `nccl` (checks/run.py runs its all_reduce_perf over two nodes): the latest
# release when this was written, tag v2.19.6 of github.com/NVIDIA/nccl-tests (commit a0b82b2260cf, 2026-07-09;
# src/common.h: NCCL_TESTS_VERSION "2.19.6"). GitHub's tag archive unpacks to nccl-tests-2.19.6/, whose 42 files'
# sha256 (`find . -type f | LC_ALL=C sort | xargs sha256sum | sha256sum`, computed from the tag's tree) the
# bring-up checks before it builds, so a mirror's copy is the same tree. Its README ("Build"): `make MPI=1
# MPI_HOME=... CUDA_HOME=... NCCL_HOME=...`; MPI=1 so that the ranks srun starts form one communicator.
NCCL_TESTS_VERSION = "2.19.6"
NCCL_TESTS_URL = f"https://github.com/NVIDIA/nccl-tests/archive/refs/tags/v{NCCL_TESTS_VERSION}.tar.gz"
NCCL_TESTS_TREE_SHA256 = "f04d111f74c9c5cb14454f2b223aaafd7edb23b9671a93f3a098314413db04a5"
NCCL_TESTS_PREFIX = f"/opt/nccl-tests-{NCCL_TESTS_VERSION}"  # make's BUILDDIR: the binaries land right there
NCCL_TESTS_SRC = f"/usr/local/src/nccl-tests-{NCCL_TESTS_VERSION}"
# what the build needs on a GPU node and the bring-up does not install (NVIDIA's CUDA repository has them, Debian's
# archive has neither): CUDA's compiler where CUDA installs it, NCCL's header and library as libnccl-dev installs them
NCCL_TESTS_NEEDS = ["/usr/local/cuda/bin/nvcc", "/usr/include/nccl.h", "/usr/lib/$(uname -m)-linux-gnu/libnccl.so"]
# what it needs and Debian has (installed by the bring-up where CUDA and NCCL are): make, the host compiler nvcc
# calls, and Open MPI (MPI=1), whose headers and libmpi are under MPI_HOME
NCCL_TESTS_PACKAGES = ["make", "g++", "libopenmpi-dev"]
NCCL_TESTS_MAKE = (f"make -C {NCCL_TESTS_SRC} -j4 MPI=1 MPI_HOME=/usr/lib/$(uname -m)-linux-gnu/openmpi "
                   f"CUDA_HOME=/usr/local/cuda NCCL_HOME=/usr BUILDDIR={NCCL_TESTS_PREFIX}")
NCCL_SKIP = ("sh bringup/up.sh hosts.yaml -e '{\"orchgen_check_args\": \"--skip nccl\"}' (one JSON -e; Pulumi: "
             "pulumi config set orchgen:checkArgs -- '--skip nccl'; by hand: python3 checks/run.py --skip nccl)")


def nccl_tests(gpu_nodes: list[str]) -> dict[str, Any]:
    """nccl-tests: what the bring-up builds where CUDA and NCCL are (vars.yaml orchgen_nccl_tests, nccl_tests.yml),
    and the steps where they are not: one record for the bring-up's NOT INSTALLED line, the README and the check
    (checks.json `nccl_tests`), so the three never disagree."""
    v = NCCL_TESTS_VERSION
    return {
        "version": v, "url": NCCL_TESTS_URL, "tree_sha256": NCCL_TESTS_TREE_SHA256, "src": NCCL_TESTS_SRC,
        "prefix": NCCL_TESTS_PREFIX, "binary": f"{NCCL_TESTS_PREFIX}/all_reduce_perf", "needs": NCCL_TESTS_NEEDS,
        "packages": NCCL_TESTS_PACKAGES, "make": NCCL_TESTS_MAKE, "nodes": gpu_nodes,
        "doc": "https://github.com/NVIDIA/nccl-tests#build",
        "why": "the bring-up builds it only where CUDA and NCCL are installed (NVIDIA's CUDA repository, not the OS's "
               "archive)",
        "steps": [
            "# on every GPU node, as root: CUDA (its nvcc at /usr/local/cuda/bin/nvcc) and NCCL's development package "
            "(libnccl-dev: /usr/include/nccl.h and libnccl.so) from NVIDIA's CUDA repository "
            "(https://docs.nvidia.com/cuda/cuda-installation-guide-linux/), then run the bring-up again: it builds "
            f"nccl-tests {v} into {NCCL_TESTS_PREFIX}. Or build it by hand, as the bring-up does:",
            f"apt-get install -y {' '.join(NCCL_TESTS_PACKAGES)}",
            f"curl -fsSL {NCCL_TESTS_URL} | tar -xz -C /usr/local/src",
            NCCL_TESTS_MAKE,
            f"# the check runs {NCCL_TESTS_PREFIX}/all_reduce_perf, else all_reduce_perf on the nodes' PATH "
            "(or: checks/run.py --nccl-tests PATH)",
            f"# or skip the check: {NCCL_SKIP}",
        ],
    }


# NVIDIA's DCGM exporter on the GPU nodes (prometheus-slurm.yaml's slurm-dcgm-exporter job): DCGM and its exporter
# come from NVIDIA's CUDA network repository, not Debian's archive ("Install DCGM", "Install DCGM Exporter")
DCGM_EXPORTER = {
    "name": "dcgm-exporter",
    "why": "DCGM and its exporter are not in Debian's or Ubuntu's archive (NVIDIA's CUDA repository ships them, paired "
           "by version); until it runs, the dashboard's GPU panels are empty and its scrape targets down",
    "doc": "https://docs.nvidia.com/datacenter/dcgm/latest/installation/install-dcgm-exporter.html",
    "on": "every GPU node",
    "steps": [
        "# NVIDIA's CUDA network repository for this OS (cuda-keyring; https://docs.nvidia.com/datacenter/dcgm/latest/"
        "installation/install-dcgm.html), then DCGM and its host engine",
        "apt-get install -y datacenter-gpu-manager-4-core && systemctl --now enable nvidia-dcgm",
        "# the DCGM exporter release paired with that DCGM, as 'Install DCGM Exporter' gives it (its package from the "
        "same repository, or its nvcr.io/nvidia/k8s/dcgm-exporter container with --net host), listening on :9400",
        "curl -s localhost:9400/metrics | grep -m1 DCGM_FI_DEV_GPU_UTIL  # what the dashboard's GPU panels read",
    ]}


K3S_DOC = "https://docs.k3s.io/quick-start"
RKE2_DOC = "https://docs.rke2.io/install/quickstart"


def kube_nodes(plan: Plan) -> dict[str, Any] | None:
    """The record of the Kubernetes pool's nodes, where the plan has a Kubernetes plane."""
    nodes = [n for s in slices(plan) for n in s.nodes]
    if plan.kube_plane is None or not nodes:
        return None
    first, rest = nodes[0], (f"{nodes[1]} ... {nodes[-1]}" if len(nodes) > 2 else ", ".join(nodes[1:]) or "none")
    dist = plan.platform.distribution
    label = "bash kubernetes/node-labels.sh   # on your machine, once every node is Ready"
    if dist == "k3s":
        return {"name": "the Kubernetes pool's nodes (k3s)", "on": f"{len(nodes)} nodes: {first} (server), {rest}",
                "why": "the bring-up sets up Slurm hosts only; k3s installs from its own script and binary "
                       "(get.k3s.io, not in Debian's archive)", "doc": K3S_DOC,
                "steps": [f"# on {first}: the server",
                          "curl -sfL https://get.k3s.io | sh -",
                          "cat /var/lib/rancher/k3s/server/node-token   # the token the agents join with",
                          f"# on every other node ({rest}): an agent",
                          f"curl -sfL https://get.k3s.io | K3S_URL=https://{first}:6443 K3S_TOKEN=<token> sh -",
                          f"# the kubeconfig: /etc/rancher/k3s/k3s.yaml of {first}, its 127.0.0.1 replaced by {first}'s address",
                          "pulumi config set kubernetes:context default   # in pulumi/: k3s names its context `default`",
                          label]}
    if dist == "rke2":
        return {"name": "the Kubernetes pool's nodes (RKE2)", "on": f"{len(nodes)} nodes: {first} (server), {rest}",
                "why": "the bring-up sets up Slurm hosts only; RKE2 installs from its own script and tarball "
                       "(get.rke2.io, not in Debian's archive)", "doc": RKE2_DOC,
                "steps": [f"# on {first}: the server",
                          "curl -sfL https://get.rke2.io | sh - && systemctl enable --now rke2-server.service",
                          "cat /var/lib/rancher/rke2/server/node-token   # the token the agents join with",
                          f"# on every other node ({rest}): an agent",
                          "mkdir -p /etc/rancher/rke2",
                          f"printf 'server: https://{first}:9345\\ntoken: <token>\\n' > /etc/rancher/rke2/config.yaml",
                          "curl -sfL https://get.rke2.io | INSTALL_RKE2_TYPE=agent sh - && systemctl enable --now rke2-agent.service",
                          f"# the kubeconfig: /etc/rancher/rke2/rke2.yaml of {first}, its 127.0.0.1 replaced by {first}'s address",
                          "pulumi config set kubernetes:context default   # in pulumi/: RKE2 names its context `default`",
                          label]}
    return {"name": "the Kubernetes pool's nodes", "on": f"{len(nodes)} nodes: {first}, {rest}",
            "why": "the bring-up sets up Slurm hosts only; they join the Kubernetes cluster you run (the fleet's "
                   "kubernetes_distribution is upstream: k3s or rke2 there gives the exact steps here)",
            "doc": "https://kubernetes.io/docs/reference/setup-tools/kubeadm/kubeadm-join/",
            "steps": ["kubeadm token create --print-join-command   # on a control-plane node of your cluster",
                      "# on every node of the pool: the printed `kubeadm join ...` (or your installer's join)",
                      "pulumi config set kubernetes:context <your-cluster's-context>   # in pulumi/",
                      label]}


def site_database(m) -> dict[str, Any] | None:
    """The record of the site's accounting database (options.slurm.accounting.storage_host): its server is the site's,
    so its database user (allowed from each slurmdbd host) and each host's password file are the site's to make."""
    if not m.accounting or not m.site or not m.site.storage_host:
        return None
    hosts = [h for h in (m.accounting_host, m.dbd_backup_host) if h]
    user, db = "slurm", m.site.database
    return {"name": f"the accounting database on {m.site.storage_host}",
            "why": "options.slurm.accounting.storage_host names the site's database server, which every slurmdbd "
                   "uses; the bring-up installs no MariaDB then and never sees that server's credentials",
            "doc": "https://slurm.schedmd.com/accounting.html",
            "on": f"{m.site.storage_host} and the slurmdbd hosts {', '.join(hosts)}",
            "steps": [f"# on {m.site.storage_host}, in mariadb as its admin: a user slurmdbd logs in as from each host",
                      *(f"CREATE USER '{user}'@'{h}' IDENTIFIED BY '<password>'; "
                        f"GRANT ALL ON {db}.* TO '{user}'@'{h}';" for h in hosts),
                      f"# the settings of slurm/mariadb-slurm.cnf in {m.site.storage_host}'s server configuration",
                      *(pass_steps(m, hosts))]}


def pass_steps(m, hosts: list[str]) -> list[str]:
    """Where each slurmdbd host keeps the password: the file slurmdbd.conf includes, or (25.11+) the script it runs."""
    kind, path = m.storage_pass
    if kind == "script":
        return [f"# on {' and '.join(hosts)}: StoragePassScript, which prints TOKEN=<password> (slurmdbd.conf(5))",
                f"printf '#!/bin/sh\\necho TOKEN=<password>\\n' > {path} && chown slurm {path} && chmod 0700 {path}"]
    return [f"# on {' and '.join(hosts)}: the password, in the file slurmdbd.conf includes",
            # -D: before the bring-up there is no /etc/slurm and no slurm user yet; the bring-up makes it slurm's
            f"install -D -m 0600 /dev/null {path} && echo 'StoragePass=<password>' > {path}"]


def not_installed(plan: Plan) -> list[dict[str, Any]]:
    m = model(plan)
    ops = m.ops
    kube = [k] if (k := kube_nodes(plan)) else []
    kube += [d] if (d := site_database(m)) else []
    kube += [DCGM_EXPORTER] if m.telemetry and m.gpu_nodes else []
    if not ops or ops.containers != "pyxis":
        return kube
    v = ENROOT_VERSION
    return kube + [
        {"name": "enroot",
         "why": "not in Debian's or Ubuntu's archive (the bring-up installs from the OS's packages only); "
                "NVIDIA publishes it as .deb files on GitHub releases",
         "doc": "https://github.com/NVIDIA/enroot/blob/master/doc/installation.md",
         "on": "every GPU node",
         "steps": [
             "arch=$(dpkg --print-architecture)",
             f"curl -fSsL -O https://github.com/NVIDIA/enroot/releases/download/v{v}/enroot_{v}-1_${{arch}}.deb",
             f"curl -fSsL -O https://github.com/NVIDIA/enroot/releases/download/v{v}/enroot+caps_{v}-1_${{arch}}.deb",
             "apt-get install -y ./enroot_*.deb ./enroot+caps_*.deb",
             "# GPUs inside containers: libnvidia-container-tools from NVIDIA's container toolkit repository "
             "(https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html)",
         ]},
        {"name": "pyxis",
         "why": "not packaged anywhere; it must be compiled on the node against this very Slurm release's "
                "spank.h (Debian's libslurm-dev), from its source on GitHub; until then slurmd runs (plugstack.conf "
                "loads pyxis as `optional`) and only --container-* jobs fail",
         "doc": f"{PYXIS_REPO}#installation",
         "on": "every node and login host",
         "steps": [
             "apt-get install -y libslurm-dev gcc make git",
             f"git clone --depth 1 {PYXIS_REPO} /usr/local/src/pyxis",
             "make -C /usr/local/src/pyxis install  # /usr/local/lib/slurm/spank_pyxis.so, read by "
             "/etc/slurm/plugstack.conf.d/pyxis.conf",
             "systemctl restart slurmd",
         ]},
    ]
