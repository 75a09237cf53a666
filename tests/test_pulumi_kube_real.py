"""The bundle's Kubernetes Pulumi program (pulumi/, from stacks/__main__.py) under the REAL Pulumi toolchain against the
test control plane (tests/kubeenv: a real kube-apiserver, scheduler and controller manager, KWOK nodes, Kueue's real
controller), as the bundle README tells a user: nodes labelled (kubernetes/node-labels.sh), `pulumi login` (a file
backend), `pulumi stack init`, `pulumi config set kubernetes:context`, `pulumi up`; then a second
`pulumi up --expect-no-changes`, a re-plan (a tenant added, planned into the same bundle folder) applied by
`pulumi up`, and `pulumi destroy`.

The toolchain is ../shared/pulumi-src/build.sh's (scripts/test.sh builds it, with `--kubernetes`, into
~/.cache/orchgen/pulumi/<version>; ORCHGEN_PULUMI_BIN names another folder): the CLI v3.276.0, the Python language
host, pulumi-resource-command v1.2.1 and pulumi-resource-kubernetes v4.25.0. The Python SDK packages are the test
venv's, i.e. the bundle's own pins (pulumi/requirements.txt: pulumi-kubernetes 4.34.2, tests/test_pulumi_stack.py
holds them equal), which users keep. The providers reach the engine from PATH (the build README's "put the plugins
on PATH"): the engine then uses the built v4.25.0 whatever version the SDK asks for, and never downloads one
(PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION). v4.25.0 is the newest pulumi-kubernetes buildable here.

The chart source is the site chart mirror the program supports (`orchgen:chartRepository`): a Helm repository on
127.0.0.1 serving ../shared/charts (tests/kubeenv/gitops.HelmRepoServer). What else differs on loopback is
tests/kubeenv/overlay.py rules 14 and 15 (a site post-renderer, `orchgen:helmPostRenderer`, for the webhooks of
controllers that run as processes or not at all; Kueue's pod Ready once its process serves).

The fleet is the smallest with a release installing CRDs before another and a gang check: one node of two GPUs,
Kueue as the gang scheduler (the GPU Operator, then Kueue), the site's own metrics.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from tests._consumers import require
from tests.kubeenv import bundle as kb
from tests.kubeenv import overlay
from tests.kubeenv.cluster import free_port
from tests.kubeenv.fixture import kube_factory  # noqa: F401
from tests.kubeenv.gitops import HelmRepoServer
from tests.support import run_cli

PULUMI_VERSION = "v3.276.0"  # ../shared/pulumi-src/build.sh's V; scripts/test.sh caches its build by it (ORCHGEN_PULUMI_BIN)
PLUGINS = ("pulumi", "pulumi-language-python", "pulumi-language-python-exec", "pulumi-resource-command",
           "pulumi-resource-kubernetes")
PASSPHRASE = "orchgen-test-passphrase"  # the stack's secrets provider (passphrase), only in this test's state
STACK = "pulumi-kube"

FLEET = {
    "apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": STACK},
    "fleet": {"fabric": {"kind": "ethernet", "nodes_per_leaf": 8},
              "pools": [{"name": "g1", "nodes": 1, "gpu": {"type": "l4", "count": 2}, "cpus": 16, "memory_gib": 64}]},
    "tenants": [{"name": "team"}],
    "workloads": [{"name": "train", "plane": "kubernetes", "tenant": "team", "nodes": 1, "gpus": 2,
                   "tightly_coupled": True}],
    "options": {"gang_scheduler": "kueue", "metrics": "site", "prometheus_url": "http://prometheus.monitoring:9090"},
}


def pulumi_bin() -> Path:
    return Path(os.environ.get("ORCHGEN_PULUMI_BIN")
                or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "orchgen" / "pulumi"
                / PULUMI_VERSION / "bin")


def _toolchain() -> Path:
    bin_dir = pulumi_bin()
    missing = [p for p in PLUGINS if not os.access(bin_dir / p, os.X_OK)]
    require(not missing, f"the Pulumi toolchain is not built ({', '.join(missing)} missing in {bin_dir}): "
                         "scripts/test.sh runs ../shared/pulumi-src/build.sh --kubernetes")
    require(os.geteuid() == 0 or os.access("/etc", os.W_OK), "needs root (Kueue's metrics certificate, overlay rule 5)")
    return bin_dir


def plan_into(fleet: dict, src: Path, bundle: Path) -> None:
    """`orchgen plan FLEET -o BUNDLE` with the installed product (tests/support.run_cli)."""
    src.write_text(yaml.safe_dump(fleet, sort_keys=False))
    r = run_cli(["plan", src, "-o", bundle], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr


class KueuePod:
    """Overlay rule 15's part at run time: Kueue's controller as a process, (re)started with the Configuration of
    the kueue release's ConfigMap whenever that changes (a rollout), its pods Ready only once it serves."""

    def __init__(self, cluster, port: int) -> None:
        self.cluster, self.port, self.config = cluster, port, None
        self.stopping, self.error = threading.Event(), None
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _configuration(self):
        cms = (self.cluster.request("GET", "/api/v1/namespaces/kueue-system/configmaps") or {}).get("items", [])
        try:  # a list's items carry no kind
            return kb.kueue_configuration([{**cm, "kind": "ConfigMap"} for cm in cms])
        except AssertionError:
            return None

    def _crds_established(self) -> bool:
        """Kueue's manager exits when its CRDs are not served yet (as its pod would, and be restarted)."""
        crd = self.cluster.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                          "workloads.kueue.x-k8s.io") or {}
        return any(c["type"] == "Established" and c["status"] == "True"
                   for c in (crd.get("status") if isinstance(crd, dict) else None or {}).get("conditions", []))

    def _loop(self) -> None:
        while not self.stopping.wait(0.3):
            try:
                config = self._configuration()
                if config is not None and config != self.config and self._crds_established():
                    proc = self.cluster.procs.pop("kueue", None)
                    if proc is not None:
                        proc.kill()
                        proc.wait(10)
                    self.cluster.start_kueue(config, port=self.port)
                    self.config, self.error = config, None
                if self.config is not None:
                    self.cluster.mark_ready("kueue-system")
            except Exception as e:  # noqa: BLE001 - a crash: retried (a kubelet restarts it), reported by the test
                self.error = e
                self.cluster.procs.pop("kueue", None)
                self.stopping.wait(2)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(30)


class Stack:
    """The operator's shell in bundle/pulumi: the real `pulumi` CLI with a file backend, KUBECONFIG the cluster's."""

    def __init__(self, bundle: Path, bin_dir: Path, work: Path, cluster) -> None:
        self.dir, self.log = bundle / "pulumi", work / "pulumi.log"
        self.env = {**cluster.env(),
                    "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
                    "VIRTUAL_ENV": str(Path(sys.executable).parent.parent),
                    "PULUMI_HOME": str(work / "pulumi-home"), "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
                    "PULUMI_SKIP_UPDATE_CHECK": "true", "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true"}
        for k in ("PULUMI_ACCESS_TOKEN", "PULUMI_BACKEND_URL"):
            self.env.pop(k, None)

    def __call__(self, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
        t = time.monotonic()
        proc = subprocess.run(["pulumi", *args, "--non-interactive"], capture_output=True, text=True, env=self.env,
                              cwd=self.dir, timeout=timeout)
        with open(self.log, "a") as f:
            f.write(f"\n===== pulumi {' '.join(args)} ({time.monotonic() - t:.1f} s, exit {proc.returncode})\n")
            f.write(proc.stdout + proc.stderr)
        if check:
            assert proc.returncode == 0, f"pulumi {' '.join(args)}: exit {proc.returncode}\n" \
                                         f"{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
        return proc

    def resources(self) -> dict[str, dict]:
        state = json.loads(self("stack", "export").stdout)
        return {r["urn"].rsplit("::", 1)[1]: r for r in state["deployment"].get("resources") or []
                if not r["type"].startswith("pulumi:")}


def converged(stack: Stack) -> None:
    """`pulumi up --expect-no-changes` as a preview: nothing would change. (This test found the bundle writing a
    ClusterQueue's Quantity fields as YAML integers, which the API server returns as strings, so that every later
    `pulumi up` updated each ClusterQueue; generator/render/kubernetes/kueue.py now writes them as strings.)"""
    proc = stack("preview", "--diff", "--expect-no-changes", timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-5000:]


def created(obj: dict) -> str:
    return obj["metadata"]["creationTimestamp"]  # RFC 3339 in UTC, seconds: ordered as strings


def written(obj: dict) -> str:
    """When the object was last written (its managedFields' latest time)."""
    return max([f["time"] for f in obj["metadata"].get("managedFields") or [] if f.get("time")] + [created(obj)])


def test_pulumi_up_installs_the_kubernetes_side_then_converges_then_applies_a_replan_then_destroys(
        tmp_path: Path, kube_factory) -> None:  # noqa: F811
    bin_dir = _toolchain()
    version = subprocess.run([str(bin_dir / "pulumi"), "version"], capture_output=True, text=True)
    assert version.stdout.strip() == PULUMI_VERSION, version
    bundle = tmp_path / "bundle"
    plan_into(FLEET, tmp_path / "fleet.yaml", bundle)
    cluster = kube_factory(hold_ready=("kueue-system",))
    # the README's first step: the nodes join (KWOK), then node-labels.sh, before `pulumi up`
    cluster.add_nodes(kb.fleet_nodes(tmp_path / "fleet.yaml", bundle))
    kb.run_node_labels(cluster, bundle)
    # overlay rule 14: the site's chart mirror, every chart of releases.yaml under its name and version
    charts = HelmRepoServer(tmp_path / "charts")
    mirror = charts.add(cluster.bin / "helm", "mirror",
                        [kb.charts_dir() / r["chart"] / r["version"] for r in kb.releases(bundle)], tmp_path / "helm")
    port = free_port()
    post = overlay.post_renderer_script(tmp_path / "post-render", port, cluster.ca_bundle())  # rule 15
    kueue = KueuePod(cluster, port)
    stack = Stack(bundle, bin_dir, tmp_path, cluster)
    try:
        _run(stack, cluster, bundle, tmp_path, mirror, post)
        assert kueue.error is None, kueue.error
    except BaseException:
        print(f"Kueue's process: {kueue.error!r}\n{cluster.log('kueue')}")
        print(cluster.kubectl("get", "pods,deployments", "-A", "-o", "wide", check=False).stdout)
        raise
    finally:
        kueue.stop()
        charts.stop()
        print(f"pulumi log: {stack.log}")


def _run(stack: Stack, cluster, bundle: Path, tmp_path: Path, mirror: str, post: Path) -> None:
    reqs = dict(line.split("==") for line in (stack.dir / "requirements.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    from importlib import metadata
    assert {n: metadata.version(n) for n in reqs} == reqs  # `pip install -r pulumi/requirements.txt`
    (tmp_path / "state").mkdir()
    stack("login", f"file://{tmp_path / 'state'}")
    stack("stack", "init", STACK)
    stack("config", "set", "kubernetes:context", "kubeenv")
    stack("config", "set", "orchgen:chartRepository", mirror)
    stack("config", "set", "orchgen:helmPostRenderer", str(post))
    stack_file = stack.dir / f"Pulumi.{STACK}.yaml"
    t = time.monotonic()
    stack("up", "--yes", timeout=900)
    print(f"pulumi up: {time.monotonic() - t:.0f} s")
    # the releases in releases.yaml's order, read off Helm's own records (its release Secrets: created when an
    # install starts, last written when it is deployed): Kueue's install started only once the GPU Operator's was
    # deployed, and the manifests' Kueue objects were created only once Kueue's was
    assert [r["name"] for r in kb.releases(bundle)] == ["gpu-operator", "kueue"]
    helm = {s["metadata"]["labels"]["name"]: s for s in json.loads(cluster.kubectl(
        "get", "secrets", "-A", "-l", "owner=helm", "-o", "json").stdout)["items"]}
    assert {n: s["metadata"]["labels"]["status"] for n, s in helm.items()} == \
        {"gpu-operator": "deployed", "kueue": "deployed"}
    assert written(helm["gpu-operator"]) <= created(helm["kueue"]), (helm["gpu-operator"]["metadata"],
                                                                      helm["kueue"]["metadata"])
    queues = [o for o in yaml.safe_load_all((bundle / "kubernetes/manifests/20-kueue.yaml").read_text()) if o]
    for q in queues:
        live = cluster.get(f"{q['kind'].lower()}s.kueue.x-k8s.io", q["metadata"]["name"],
                           *(["-n", q["metadata"]["namespace"]] if q["metadata"].get("namespace") else []))
        assert written(helm["kueue"]) <= created(live), (q["kind"], live["metadata"])
    # the bundle's `checks` output: the gang admitted whole by the real Kueue
    out = json.loads(stack("stack", "output", "--json").stdout)
    checks = json.loads(out["checks"])
    assert checks["gang"]["ok"] is True and "admitted whole: 2/2 pods Running" in json.dumps(checks["gang"]), checks
    assert out["releases"] == {"gpu-operator": "v26.7.0", "kueue": "0.19.2"}
    assert cluster.get("clusterqueues")["items"] and cluster.get("localqueues", "-n", "team")["items"]

    # a second `pulumi up` changes nothing (and fails if it would)
    t = time.monotonic()
    converged(stack)
    print(f"pulumi preview --expect-no-changes: {time.monotonic() - t:.0f} s")

    # a re-plan into the same folder: a tenant added (its namespace, quota, queue; Kueue's fair sharing, a
    # rollout of its release). The operator's stack file stays.
    before = stack_file.read_bytes()
    fleet = json.loads(json.dumps(FLEET))
    fleet["tenants"].append({"name": "vision"})
    plan_into(fleet, tmp_path / "fleet.yaml", bundle)
    assert stack_file.read_bytes() == before, "orchgen plan changed or dropped the operator's stack file"
    t = time.monotonic()
    replan = stack("up", "--yes", timeout=900)
    print(f"pulumi up of the re-plan (tenant added): {time.monotonic() - t:.0f} s")
    assert re.search(r"~ \d+ updated", replan.stdout) and re.search(r"\+ \d+ created", replan.stdout), \
        replan.stdout[-3000:]
    assert cluster.get("localqueues", "-n", "vision")["items"], "the re-plan's tenant has no LocalQueue"
    assert releases_revision(cluster, "kueue") == 2 and releases_revision(cluster, "gpu-operator") == 1
    converged(stack)

    # `pulumi destroy`: what users depend on stays (tenant namespaces, the CRD-installing releases), the rest goes
    t = time.monotonic()
    stack("destroy", "--yes", timeout=600)
    print(f"pulumi destroy: {time.monotonic() - t:.0f} s")
    assert stack.resources() == {}
    names = {n["metadata"]["name"] for n in cluster.get("namespaces")["items"]}
    assert {"team", "vision", "kueue-system", "gpu-operator"} <= names, names
    assert releases_revision(cluster, "kueue") == 2  # retained, not uninstalled
    assert not cluster.get("localqueues", "-A")["items"]  # the manifests' objects are deleted


def kb_name(obj: dict) -> str:
    """The program's resource name of a manifest object (stacks/__main__.py resource_name)."""
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def releases_revision(cluster, name: str) -> int:
    secrets = json.loads(cluster.kubectl("get", "secrets", "-A", "-l", f"owner=helm,name={name}", "-o",
                                         "json").stdout)["items"]
    return max((int(s["metadata"]["labels"]["version"]) for s in secrets), default=0)
