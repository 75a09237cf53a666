"""GPU health on the Kubernetes plane (issues 20, 34; generator/render/kubernetes/gpu_health.py).

- Every example with a Kubernetes plane: no pod template orchgen writes (manifests and starters) but
  the checker's tolerates the quarantine taint, and `options.gpu_health: site` writes no health objects.
- The scripts: gpu-health.sh in the ConfigMap is byte for byte Slurm's (one check), shellcheck passes
  on it, gpu-health.py compiles.
- Real consumer (tests/kubeenv: kube-apiserver with RBAC, controllers, KWOK nodes): 38-gpu-health.yaml
  applies, its DaemonSet places a checker on each pool node and the scheduler places the controller.
  Then the code runs for real against that API server, each as its ServiceAccount
  with a token bound to its pod (TokenRequest, as the kubelet mounts one): `gpu-health.py report` with
  a fake nvidia-smi (tests/fake_gpu.py) sets each node's condition (the node whose GPU fell off the bus,
  the node with an uncorrectable ECC error and the one with an Xid in its kernel log report False),
  and `gpu-health.py quarantine`, watching, cordons and taints exactly those, never the healthy one,
  never uncordons, and quarantines again a node given back while still reported unhealthy. The
  admission policies refuse a checker another node's status, another condition, labels, annotations
  and capacity, and the controller a change but the quarantine; `kubectl auth can-i --as` shows each
  ServiceAccount's rights and nothing more.
"""
from __future__ import annotations

import json
import os
import py_compile
import re
import shutil
import subprocess
import sys
import time
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
    # the checker alone tolerates the health taint: it keeps reporting on a quarantined node
    checkers = [o for o in objs if o["kind"] == "DaemonSet" and o["metadata"].get("namespace") == gpu_health.NAMESPACE]
    assert all(tolerates(o["spec"]["template"]["spec"]["tolerations"], gpu_health.TAINT) for o in checkers)
    lists = [t for o in objs if o not in checkers for t in toleration_lists(o)]
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
    (tmp_path / "gpu-health.py").write_text(cm["data"]["gpu-health.py"])
    py_compile.compile(str(tmp_path / "gpu-health.py"), doraise=True)
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


def test_checker_reports_and_one_controller_quarantines(tmp_path, kube):
    plan = plan_of(REPO / "examples" / "cloud-training.yaml")
    files = render(plan)
    objs = docs(files, HEALTH)
    ds = next(o for o in objs if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "gpu-health-h100")
    spec = ds["spec"]["template"]["spec"]
    pool_taints = [{k: v for k, v in t.items() if k != "operator"} for t in spec.get("tolerations", [])
                   if t["key"] != gpu_health.TAINT["key"]]
    # the pool's nodes (cloud-training's plane has GPU pools only, so the controller runs on one of them
    # too: gpu_health.controller_pool)
    kube.add_nodes([{"name": n, "labels": spec["nodeSelector"], "taints": pool_taints,
                     "capacity": {"nvidia.com/gpu": "8"}} for n in NODES])
    kube.apply(objs)
    ns = gpu_health.NAMESPACE
    ctl_spec = next(o for o in objs if o["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert ctl_spec["nodeSelector"] == spec["nodeSelector"]

    def placed() -> dict[str, str]:
        return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in kube.list("pods", ns)}
    # the DaemonSet controller places a checker on each GPU node, the scheduler the controller (its
    # namespace's Pod Security level admits both)
    kube.wait_for("a checker per GPU node, the controller on one", lambda: sorted(
        n for p, n in placed().items() if p.startswith("gpu-health-h100")) == sorted(NODES) and [
        n in NODES for p, n in placed().items() if p.startswith(gpu_health.CONTROLLER)] == [True], timeout=60)

    def get_node(name: str) -> dict[str, Any]:  # as `kubectl get node NAME -o json`, without a process
        return kube.read({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    before = {n: get_node(n) for n in NODES}
    checker_on = {n: p for p, n in placed().items() if p.startswith("gpu-health-h100")}
    ctl_pod = next(p for p in placed() if p.startswith(gpu_health.CONTROLLER))

    # each identity's token bound to its pod (TokenRequest with the pod as bound object), as the kubelet
    # mounts it into that pod: the API server reads the pod's node from the checker's, and the own-node
    # admission policy holds the checker to that node
    def sa_dir(pod: str, account: str = gpu_health.NAME) -> Path:
        sa = tmp_path / f"sa-{pod}"
        if not sa.is_dir():
            sa.mkdir()
            token = kube.kubectl("create", "token", account, "-n", ns,
                                 "--bound-object-kind", "Pod", "--bound-object-name", pod).stdout.strip()
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
    api_env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "KUBERNETES_SERVICE_HOST": host,
               "KUBERNETES_SERVICE_PORT": port}

    def check(node: str, fail: bool, token_of: str | None = None) -> subprocess.CompletedProcess:
        env = {**api_env, "NODE_NAME": node, "SERVICEACCOUNT_DIR": str(sa_dir(checker_on[token_of or node])),
               "GPU_COUNT": env_of["GPU_COUNT"], "GPU_TYPE": env_of["GPU_TYPE"], **({"SMI_FAIL": "1"} if fail else {})}
        return subprocess.run([sys.executable, str(scripts / "gpu-health.py"), "report", "--once"],
                              capture_output=True, text=True, env=env, timeout=60)

    def cond(node: str) -> dict[str, Any] | None:
        return next((c for c in get_node(node)["status"]["conditions"] if c["type"] == gpu_health.CONDITION), None)

    def quarantined(node: str) -> bool:
        n = get_node(node)
        return bool(n["spec"].get("unschedulable")) and gpu_health.TAINT in (n["spec"].get("taints") or [])

    # the controller, as its pod runs it: watching the nodes with its own token
    log = (tmp_path / "controller.log").open("w")
    ctl = subprocess.Popen([sys.executable, str(scripts / "gpu-health.py"), "quarantine"], stdout=log,
                           stderr=subprocess.STDOUT, env={**api_env, "SERVICEACCOUNT_DIR": str(
                               sa_dir(ctl_pod, gpu_health.CONTROLLER))})
    try:
        # the API server enforces a new ValidatingAdmissionPolicy once its policy informer has loaded it, a
        # moment after the create (seen here under load: a first stray report went through): probed with a
        # server-side dry run as gpu-good's checker on gpu-bad, which changes nothing, until it is refused
        probe_token = (sa_dir(checker_on["gpu-good"]) / "token").read_text()
        probe = {"status": {"conditions": [{"type": gpu_health.CONDITION, "status": "False", "reason": "Probe",
                                            "message": "probe"}]}}
        kube.wait_for("the checkers' own-node policy in force", lambda: "may change only the node its own pod "
                      "runs on" in kube.kubectl("--token", probe_token, "patch", "node", "gpu-bad",
                                                "--subresource=status", "--type", "strategic", "--dry-run=server",
                                                "-p", json.dumps(probe), check=False).stderr, timeout=30)
        # a checker cannot report on another node: the token of gpu-good's pod is refused on gpu-bad
        stray = check("gpu-bad", True, token_of="gpu-good")
        assert stray.returncode == 2 and "may change only the node its own pod runs on" in stray.stderr, stray.stderr
        assert cond("gpu-bad") is None
        good, bad = check("gpu-good", False), check("gpu-bad", True)
        assert (good.returncode, bad.returncode) == (0, 1), (good.stderr, bad.stderr)
        assert good.stdout.strip().startswith("gpu-good: ok: 8x h100 GPUs: 8x NVIDIA H100 80GB HBM3"), good.stdout
        fail_line = "FAIL: nvidia-smi failed: Unable to determine the device handle for GPU0000:1B:00.0: Unknown Error"
        c = cond("gpu-bad")
        assert (c["status"], c["reason"], c["message"]) == ("False", "GPUCheckFailed", fail_line), c
        assert (cond("gpu-good")["status"], cond("gpu-good")["reason"]) == ("True", "GPUCheckPassed")
        # the controller cordons and taints the node its checker reports unhealthy, and says why
        kube.wait_for("gpu-bad quarantined by the controller", lambda: quarantined("gpu-bad"), timeout=30)
        node = get_node("gpu-bad")
        assert node["spec"]["taints"] == before["gpu-bad"]["spec"].get("taints", []) + [gpu_health.TAINT]
        assert node["metadata"]["annotations"][gpu_health.ANNOTATION] == fail_line
        # an uncorrectable ECC error (nvidia-smi's counter) and an Xid that needs a reset (the kernel log
        # the pod reads with CAP_SYSLOG) are reported and quarantined too
        ecc, xid = check("gpu-ecc", False), check("gpu-xid", False)
        assert (ecc.returncode, xid.returncode) == (1, 1), (ecc.stderr, xid.stderr)
        assert cond("gpu-ecc")["message"] == "FAIL: GPU 2 (00000000:1A:00.0): 1 uncorrectable ECC errors"
        assert "Xid 74" in cond("gpu-xid")["message"]
        kube.wait_for("gpu-ecc and gpu-xid quarantined", lambda: quarantined("gpu-ecc") and quarantined("gpu-xid"),
                      timeout=30)
        assert "Xid 74" in get_node("gpu-xid")["metadata"]["annotations"][gpu_health.ANNOTATION]
        # a second round moves the heartbeat, not the transition, and changes no node
        first = cond("gpu-bad")
        again = check("gpu-bad", True)
        assert again.returncode == 1 and cond("gpu-bad")["lastTransitionTime"] == first["lastTransitionTime"]
        assert get_node("gpu-bad")["spec"] == node["spec"]
        # the healthy node is left alone
        untouched = get_node("gpu-good")
        assert untouched["spec"] == before["gpu-good"]["spec"]
        assert gpu_health.ANNOTATION not in untouched["metadata"].get("annotations", {})

        # the checker can change nothing but its own condition (server-side dry runs as its identity)
        token = (sa_dir(checker_on["gpu-good"]) / "token").read_text()

        def as_checker(*args: str, body: dict[str, Any]) -> subprocess.CompletedProcess:
            return kube.kubectl("--token", token, "patch", "node", *args, "--type", "strategic", "--dry-run=server",
                                "-o", "json", "-p", json.dumps(body), check=False)
        cordon = as_checker("gpu-good", body={"spec": {"unschedulable": True, "taints": [gpu_health.TAINT]}})
        # (RBAC refuses: kubectl's read of the node before its patch is the first request refused)
        assert cordon.returncode != 0 and re.search(r'cannot (get|patch) resource "nodes" in API group "" at the '
                                                    r'cluster scope', cordon.stderr), cordon.stderr
        for body, words in (
                ({"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "X", "message": "x"}]}},
                 f"may set only the {gpu_health.CONDITION} condition"),
                ({"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}}, "may change nothing but"),
                ({"metadata": {"annotations": {gpu_health.ANNOTATION: "x"}}}, "may change nothing but"),
                ({"status": {"capacity": {"nvidia.com/gpu": "16"}}}, "may change nothing but")):
            r = as_checker("gpu-good", "--subresource=status", body=body)
            assert r.returncode != 0 and words in r.stderr, (body, r.stderr)
        # a spec in a status patch is dropped by the API server (the nodes/status strategy keeps the spec)
        r = as_checker("gpu-good", "--subresource=status", body={"spec": {"unschedulable": True}})
        assert r.returncode == 0 and json.loads(r.stdout)["spec"] == untouched["spec"], r.stderr

        # the controller may only quarantine a node reported unhealthy
        ctl_token = (sa_dir(ctl_pod, gpu_health.CONTROLLER) / "token").read_text()

        def as_controller(node: str, body: dict[str, Any]) -> subprocess.CompletedProcess:
            return kube.kubectl("--token", ctl_token, "patch", "node", node, "--type", "merge", "--dry-run=server",
                                "-p", json.dumps(body), check=False)
        for n, body, words in (("gpu-good", {"spec": {"unschedulable": True}}, "condition is False"),
                               ("gpu-bad", {"spec": {"unschedulable": False}}, "never uncordon"),
                               ("gpu-bad", {"spec": {"taints": []}}, "may only add"),
                               ("gpu-bad", {"metadata": {"labels": {"x": "y"}}}, "labels")):
            r = as_controller(n, body)
            assert r.returncode != 0 and words in r.stderr, (n, body, r.stderr)

        # a person gives a node back: while its condition is False the controller quarantines it again;
        # once the checker reports True (after the repair) the node stays in service, and the controller
        # never uncordons by itself
        def give_back(node: str) -> None:
            kube.kubectl("uncordon", node)
            kube.kubectl("taint", "nodes", node, f"{gpu_health.TAINT['key']}-")
        give_back("gpu-ecc")
        kube.wait_for("gpu-ecc quarantined again", lambda: quarantined("gpu-ecc"), timeout=30)
        repaired = check("gpu-bad", False)
        assert repaired.returncode == 0 and cond("gpu-bad")["status"] == "True", repaired.stderr
        time.sleep(1)
        assert quarantined("gpu-bad")
        give_back("gpu-bad")
        time.sleep(1)
        assert not quarantined("gpu-bad") and ctl.poll() is None
    finally:
        ctl.terminate()
        ctl.wait(timeout=10)
        log.close()
    said = (tmp_path / "controller.log").read_text()
    # once per unhealthy node; gpu-ecc again after each step of its give-back (uncordon, then untaint)
    done = [line.split(":")[0] for line in said.splitlines() if "cordoned and tainted" in line]
    assert sorted(set(done)) == ["gpu-bad", "gpu-ecc", "gpu-xid"] and done.count("gpu-ecc") >= 2, said
    assert done.count("gpu-bad") == done.count("gpu-xid") == 1 and ": error:" not in said, said

    # the rights: everything each ServiceAccount may do on resources (`kubectl auth can-i --list`, a
    # SelfSubjectRulesReview as it), beside the self-reviews every authenticated user has
    # (system:basic-user), and a SubjectAccessReview per right that matters
    def rights(account: str) -> dict[str, list[str]]:
        r = kube.kubectl("auth", "can-i", "--list", f"--as=system:serviceaccount:{ns}:{account}")
        rows = [line for line in r.stdout.splitlines()[1:] if line and not line[0].isspace()]
        got = {line.split()[0]: sorted(re.findall(r"\[([^\]]*)\]", line)[-1].split()) for line in rows}
        return {k: v for k, v in got.items() if not k.startswith("selfsubject")}
    assert rights(gpu_health.NAME) == {"nodes/status": ["get", "patch"]}
    assert rights(gpu_health.CONTROLLER) == {"nodes": ["get", "list", "patch", "watch"]}

    def can(account: str, *args: str) -> bool:
        r = kube.kubectl("auth", "can-i", *args, f"--as=system:serviceaccount:{ns}:{account}", check=False)
        assert r.stdout.strip() in ("yes", "no"), r.stderr
        return r.stdout.strip() == "yes"
    assert can(gpu_health.NAME, "patch", "nodes/gpu-bad", "--subresource=status")
    assert not can(gpu_health.NAME, "patch", "nodes/gpu-bad")
    assert can(gpu_health.CONTROLLER, "patch", "nodes/gpu-bad")
    assert not can(gpu_health.CONTROLLER, "patch", "nodes/gpu-bad", "--subresource=status")
