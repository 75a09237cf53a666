"""GPU health on the Kubernetes plane (issue 20; generator/render/kubernetes/gpu_health.py).

- Every example with a Kubernetes plane: no pod template orchgen writes (manifests and starters)
  tolerates the quarantine taint, and `options.gpu_health: site` writes no health objects.
- The scripts: gpu-health.sh in the ConfigMap is byte for byte Slurm's (one check), shellcheck passes
  on it, gpu-quarantine.py compiles.
- Real consumer (tests/kubeenv: kube-apiserver with RBAC, controllers, KWOK nodes): 38-gpu-health.yaml
  applies and its DaemonSet places a checker on each pool node; gpu-quarantine.py then runs for real
  against that API server as the DaemonSet's ServiceAccount (a TokenRequest token, as the kubelet
  mounts one), with a fake nvidia-smi (tests/fake_gpu.py): the node whose GPU fell off the bus and the
  node with an uncorrectable ECC error are cordoned and tainted, the healthy one is untouched, and
  the ServiceAccount can do nothing but get and patch nodes (SubjectAccessReview through
  `kubectl auth can-i --as`).
"""
from __future__ import annotations

import os
import py_compile
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.render import render
from generator.render.kubernetes import gpu_health
from generator.render.kubernetes.common import tolerates
from tests import fake_gpu
from tests._consumers import REPO, require
from tests.kubeenv.fixture import kube, kube_factory  # noqa: F401
from tests.support import plan_of

EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
HEALTH = "kubernetes/manifests/38-gpu-health.yaml"


def bundle(example: Path, **options: Any) -> dict[str, bytes]:
    return render(plan_of(example, **options))


def docs(files: dict[str, bytes], prefix: str) -> list[dict[str, Any]]:
    return [d for rel, blob in sorted(files.items()) if rel.startswith(prefix) and rel.endswith(".yaml")
            for d in yaml.safe_load_all(blob) if d]


def toleration_lists(obj: Any):
    """Every `tolerations` list anywhere in an object (pod templates nest at any depth)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "tolerations" and isinstance(v, list):
                yield v
            else:
                yield from toleration_lists(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from toleration_lists(v)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
def test_no_pod_orchgen_writes_tolerates_the_health_taint(example):
    files = bundle(example)
    objs = docs(files, "kubernetes/manifests/") + docs(files, "kubernetes/workloads/")
    if not objs:
        pytest.skip(f"{example.stem}: no Kubernetes plane")
    lists = [t for o in objs for t in toleration_lists(o)]
    assert not any(tolerates(t, gpu_health.TAINT) for t in lists)
    plan = plan_of(example)
    if any(plan.platform.taints.values()):  # the check sees the pool tolerations that are there
        assert any(tolerates(t, {"key": k, "value": v, "effect": e}) for t in lists
                   for ts in plan.platform.taints.values() for k, v, e in ts)
    if gpu_health.gpu_pools(plan):
        sets = [o for o in docs(files, HEALTH) if o["kind"] == "DaemonSet"]
        assert sorted(d["metadata"]["name"] for d in sets) == sorted(f"gpu-health-{p.pool}"
                                                                    for p in gpu_health.gpu_pools(plan))
        assert b"38-gpu-health.yaml" in files["README.md"]


def test_site_brings_its_own():
    example = REPO / "examples" / "cloud-training.yaml"
    assert HEALTH in bundle(example)
    files = bundle(example, gpu_health="site")
    assert HEALTH not in files and b"38-gpu-health.yaml" not in files["README.md"]


def test_the_scripts(tmp_path):
    files = bundle(REPO / "examples" / "cloud-training.yaml")
    cm = next(o for o in docs(files, HEALTH) if o["kind"] == "ConfigMap")
    # the same script nhc.conf runs on a Slurm node (templates/slurm/gpu-health.sh.j2)
    from generator.render.templating import render_template

    class M:
        cluster = plan_of(REPO / "examples" / "cloud-training.yaml").name
    assert cm["data"]["gpu-health.sh"] == render_template("slurm/gpu-health.sh.j2", m=M).decode()
    (tmp_path / "gpu-health.sh").write_text(cm["data"]["gpu-health.sh"])
    (tmp_path / "gpu-quarantine.py").write_text(cm["data"]["gpu-quarantine.py"])
    py_compile.compile(str(tmp_path / "gpu-quarantine.py"), doraise=True)
    checker = shutil.which("shellcheck")
    require(checker, "shellcheck not installed (apt-get install shellcheck)")
    r = subprocess.run([checker, str(tmp_path / "gpu-health.sh")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


# nvidia-smi as it answers on a healthy node, after an XID 79 (GPU fallen off the bus: SMI_FAIL), or
# with an uncorrectable ECC error on GPU 2 of node gpu-ecc (tests/fake_gpu.py); the kernel log as the
# pod reads it with CAP_SYSLOG: an application's Xid 13 on gpu-good (no fault of the node), an Xid 74
# (NVLink error, a reset needed) on gpu-xid while nvidia-smi still answers
FAKE_SMI = fake_gpu.nvidia_smi({"gpu-ecc": {"gpu": 2, "ecc.errors.uncorrected.volatile.total": "1"}},
                               node_var="NODE_NAME")
FAKE_DMESG = fake_gpu.dmesg({"gpu-good": [fake_gpu.xid(13)], "gpu-xid": [fake_gpu.xid(74)]}, node_var="NODE_NAME")
NODES = ("gpu-good", "gpu-bad", "gpu-ecc", "gpu-xid")


def test_failing_gpu_node_is_cordoned_and_tainted_by_the_service_account(tmp_path, kube):
    plan = plan_of(REPO / "examples" / "cloud-training.yaml")
    files = render(plan)
    objs = docs(files, HEALTH)
    kube.apply(objs)
    ds = next(o for o in objs if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "gpu-health-h100")
    spec = ds["spec"]["template"]["spec"]
    pool_taints = [{k: v for k, v in t.items() if k != "operator"} for t in spec.get("tolerations", [])]
    kube.add_nodes([{"name": n, "labels": spec["nodeSelector"], "taints": pool_taints,
                     "capacity": {"nvidia.com/gpu": "8"}} for n in NODES])
    # the DaemonSet controller places a checker on each (its namespace's Pod Security level admits it)
    kube.wait_for("a checker pod per node", lambda: sorted(
        p["spec"].get("nodeName", "") for p in kube.get("pods", "-n", gpu_health.NAMESPACE)["items"]
        if p["metadata"]["name"].startswith("gpu-health-h100")) == sorted(NODES), timeout=60)
    before = {n: kube.get("node", n) for n in NODES}

    # the ServiceAccount's token bound to the checker pod on a node (TokenRequest with the pod as bound
    # object), as the kubelet mounts it into that pod: the API server reads the pod's node from it, and
    # the own-node admission policy holds the checker to that node
    pod_on = {p["spec"]["nodeName"]: p["metadata"]["name"] for p in kube.get("pods", "-n", gpu_health.NAMESPACE)["items"]
              if p["metadata"]["name"].startswith("gpu-health-h100")}

    def sa_dir(node: str) -> Path:
        sa = tmp_path / f"sa-{node}"
        if not sa.is_dir():
            sa.mkdir()
            token = kube.kubectl("create", "token", gpu_health.NAME, "-n", gpu_health.NAMESPACE,
                                 "--bound-object-kind", "Pod", "--bound-object-name", pod_on[node]).stdout.strip()
            (sa / "token").write_text(token)
            shutil.copy(kube.certs / "ca.crt", sa / "ca.crt")
        return sa
    server = yaml.safe_load(kube.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    host, port = server.removeprefix("https://").rsplit(":", 1)
    cm = next(o for o in objs if o["kind"] == "ConfigMap")
    scripts = tmp_path / "opt"
    scripts.mkdir()
    for name, text in cm["data"].items():
        (scripts / name).write_text(text)
    (tmp_path / "bin").mkdir()
    for name, text in (("nvidia-smi", FAKE_SMI), ("dmesg", FAKE_DMESG)):
        (tmp_path / "bin" / name).write_text(text)
        (tmp_path / "bin" / name).chmod(0o755)
    env_of = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}

    def check(node: str, fail: bool, token_of: str | None = None) -> subprocess.CompletedProcess:
        env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "NODE_NAME": node,
               "SERVICEACCOUNT_DIR": str(sa_dir(token_of or node)),
               "KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port,
               "GPU_COUNT": env_of["GPU_COUNT"], "GPU_TYPE": env_of["GPU_TYPE"], **({"SMI_FAIL": "1"} if fail else {})}
        return subprocess.run([sys.executable, str(scripts / "gpu-quarantine.py"), "--once"],
                              capture_output=True, text=True, env=env, timeout=60)

    # a checker cannot quarantine another node: the token of gpu-good's pod is refused on gpu-bad
    stray = check("gpu-bad", True, token_of="gpu-good")
    assert stray.returncode == 2 and "403" in stray.stderr, (stray.returncode, stray.stderr)
    assert kube.get("node", "gpu-bad")["spec"] == before["gpu-bad"]["spec"]
    good, bad = check("gpu-good", False), check("gpu-bad", True)
    assert (good.returncode, bad.returncode) == (0, 1), (good.stderr, bad.stderr)
    assert good.stdout.strip() == "gpu-good: ok: 8x h100 GPUs: 8x NVIDIA H100 80GB HBM3", good.stdout
    assert bad.stdout.strip().endswith("cordoned and tainted")
    node = kube.get("node", "gpu-bad")
    assert node["spec"]["unschedulable"] is True
    assert node["spec"]["taints"] == before["gpu-bad"]["spec"].get("taints", []) + [gpu_health.TAINT]
    assert node["metadata"]["annotations"][gpu_health.ANNOTATION] == (
        "FAIL: nvidia-smi failed: Unable to determine the device handle for GPU0000:1B:00.0: Unknown Error")
    untouched = kube.get("node", "gpu-good")
    assert untouched["spec"] == before["gpu-good"]["spec"]
    assert gpu_health.ANNOTATION not in untouched["metadata"].get("annotations", {})
    # an uncorrectable ECC error (nvidia-smi's counter, readable without privilege) quarantines too
    ecc = check("gpu-ecc", False)
    assert ecc.returncode == 1 and ecc.stdout.strip().endswith("cordoned and tainted"), ecc.stderr
    node_ecc = kube.get("node", "gpu-ecc")
    assert node_ecc["spec"]["unschedulable"] is True
    assert node_ecc["spec"]["taints"] == before["gpu-ecc"]["spec"].get("taints", []) + [gpu_health.TAINT]
    assert node_ecc["metadata"]["annotations"][gpu_health.ANNOTATION] == (
        "FAIL: GPU 2 (00000000:1A:00.0): 1 uncorrectable ECC errors")
    assert kube.get("node", "gpu-good")["spec"] == before["gpu-good"]["spec"]
    # an Xid that needs a reset, in the kernel log the pod reads with CAP_SYSLOG, quarantines too
    xid = check("gpu-xid", False)
    assert xid.returncode == 1 and xid.stdout.strip().endswith("cordoned and tainted"), (xid.stdout, xid.stderr)
    node_xid = kube.get("node", "gpu-xid")
    assert node_xid["spec"]["unschedulable"] is True
    assert "Xid 74" in node_xid["metadata"]["annotations"][gpu_health.ANNOTATION], node_xid["metadata"]["annotations"]
    # a second round changes nothing
    again = check("gpu-bad", True)
    assert again.returncode == 1 and again.stdout.strip().endswith("already quarantined")
    assert kube.get("node", "gpu-bad")["spec"] == node["spec"]

    # nothing else: a SubjectAccessReview per verb, as the ServiceAccount
    who = f"--as=system:serviceaccount:{gpu_health.NAMESPACE}:{gpu_health.NAME}"

    def can(*args: str) -> bool:
        r = kube.kubectl("auth", "can-i", *args, who, check=False)
        assert r.stdout.strip() in ("yes", "no"), r.stderr
        return r.stdout.strip() == "yes"
    assert can("get", "nodes/gpu-bad") and can("patch", "nodes/gpu-good")
    for args in (("list", "nodes"), ("watch", "nodes"), ("update", "nodes"), ("delete", "nodes"),
                 ("create", "nodes"), ("patch", "nodes", "--subresource=status"), ("get", "pods", "-A"),
                 ("create", "pods/eviction", "-A"), ("delete", "pods", "-A"), ("get", "secrets", "-A"),
                 ("get", "configmaps", "-n", gpu_health.NAMESPACE), ("create", "events", "-A"),
                 ("patch", "daemonsets.apps", "-n", gpu_health.NAMESPACE), ("*", "*")):
        assert not can(*args), args
