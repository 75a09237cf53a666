"""A Kubernetes control plane on loopback from the binaries tests/kubeenv/build.sh builds.

What it starts, as controller-runtime's envtest does (certificates made here with openssl, a
static admin token in `system:masters`, nothing listening beyond 127.0.0.1):
- etcd (one member, a temp data dir, no fsync);
- kube-apiserver (RBAC, the default admission plugins, optionally an admission configuration);
- kube-controller-manager (Job, ReplicaSet, namespace, garbage-collector, quota, service-account
  controllers: everything but the node, route and cloud controllers, which need real nodes);
- kube-scheduler (default profile);
- KWOK, which plays every node's kubelet: nodes this module creates become Ready, and pods bound to
  them become Running, with no container run;
- Kueue's controller manager (on demand, `start_kueue`) with the configuration the bundle's
  chart release renders, its webhooks served on loopback;
- LeaderWorkerSet's controller manager (`Cluster(lws=True)`, `start_lws`, built by
  tests/kubeenv/lws/build.sh) likewise, with the lws release's configuration;
- Volcano's scheduler, controller manager and admission webhook server (`Cluster(volcano=True)`,
  `start_volcano`, built by tests/kubeenv/volcano/build.sh) with the volcano release's arguments and
  configuration;
- Flux's source-, kustomize- and helm-controller (`start_flux`, built by tests/kubeenv/flux/build.sh),
  as `flux install` runs them in flux-system, the artifact server on loopback.
Everything the harness must change in a bundle to run here is in tests/kubeenv/overlay.py.
"""
from __future__ import annotations

import base64
import collections
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
from pathlib import Path
from typing import Any, Iterable

import yaml

from generator.yamlio import resolve_numbers_as_go

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
BINARIES = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok", "kueue", "helm")
# kube-controller-manager --controllers: all but those that need real kubelets, clouds or routes. The
# node-lifecycle controller would taint KWOK's nodes unreachable whenever a heartbeat is late on this
# loaded machine and evict what the tests just placed.
CONTROLLERS = "*,-node-lifecycle-controller,-node-ipam-controller,-cloud-node-lifecycle-controller," \
              "-service-lb-controller,-node-route-controller,-persistentvolume-attach-detach-controller"
# Dynamic Resource Allocation on Kubernetes 1.33 (Cluster(dra=True)): beta there with its feature gate
# off by default (k8s.io/kubernetes v1.33 pkg/features/kube_features.go: DynamicResourceAllocation Beta
# from 1.32, Default: false) and its API group not served.
# The gate goes to the API server (the resource.k8s.io fields of PodSpec), the scheduler (its
# DynamicResources plugin) and the controller manager (the resourceclaim controller, which makes a
# pod's ResourceClaim from its ResourceClaimTemplate); v1beta1 and v1beta2 are the group's versions in
# 1.33 (v1 is 1.34's), and a beta API is served only when runtime-config names it.
DRA_GATE = "DynamicResourceAllocation=true"
DRA_RUNTIME_CONFIG = "resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true"


def k8s_version() -> str:
    for line in (HERE / "k8s" / "go.mod").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "k8s.io/kubernetes":
            return parts[1]
    raise RuntimeError("tests/kubeenv/k8s/go.mod names no k8s.io/kubernetes")


def bin_dir() -> Path:
    """Where build.sh puts the binaries (same key: the Kubernetes version and a hash of every
    go.mod and go.sum of tests/kubeenv and of build.sh)."""
    import hashlib

    files = sorted(HERE.glob("*/go.mod")) + sorted(HERE.glob("*/go.sum")) + [HERE / "build.sh"]
    key = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:12]
    base = os.environ.get("ORCHGEN_KUBEENV_CACHE") or \
        str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "orchgen" / "kubeenv")
    return Path(base) / f"{k8s_version()}-{key}" / "bin"


def lws_binary() -> Path:
    """Where tests/kubeenv/lws/build.sh puts LeaderWorkerSet's controller manager (same key: the
    module's go.mod and go.sum and the script)."""
    import hashlib

    mod = HERE / "lws" / "module"
    version = next(line.split()[-1] for line in (mod / "go.mod").read_text().splitlines()
                   if "sigs.k8s.io/lws " in line + " " and line.split()[-1].startswith("v"))
    files = [mod / "go.mod", mod / "go.sum", HERE / "lws" / "build.sh"]
    key = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:12]
    return bin_dir().parents[1] / f"lws-{version}-{key}" / "bin" / "lws-manager"


def netpol_binary() -> Path:
    """Where tests/kubeenv/netpol/build.sh puts the NetworkPolicy engine of the tenant-wall tests
    (Cyclonus's matcher; same key: the module's go.mod, go.sum, main.go and the script)."""
    import hashlib

    mod = HERE / "netpol" / "module"
    version = next(line.split()[-1] for line in (mod / "go.mod").read_text().splitlines()
                   if "github.com/mattfenwick/cyclonus " in line + " " and line.split()[-1].startswith("v"))
    files = [mod / "go.mod", mod / "go.sum", mod / "main.go", HERE / "netpol" / "build.sh"]
    key = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:12]
    return bin_dir().parents[1] / f"netpol-{version}-{key}" / "bin" / "netpol-verdict"


def volcano_bin_dir() -> Path:
    """Where tests/kubeenv/volcano/build.sh puts vc-scheduler, vc-controller-manager and
    vc-webhook-manager (same key: the module's go.mod and go.sum and the script)."""
    import hashlib

    mod = HERE / "volcano" / "module"
    version = next(line.split()[-1] for line in (mod / "go.mod").read_text().splitlines()
                   if "volcano.sh/volcano " in line + " " and line.split()[-1].startswith("v"))
    files = [mod / "go.mod", mod / "go.sum", HERE / "volcano" / "build.sh"]
    key = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:12]
    return bin_dir().parents[1] / f"volcano-{version}-{key}" / "bin"


FLUX_CONTROLLERS = ("source-controller", "kustomize-controller", "helm-controller")


def flux_bin_dir() -> Path:
    """Where tests/kubeenv/flux/build.sh puts Flux's controllers and the OCI registry (same key: the
    three modules' go.mod and go.sum and the script)."""
    import hashlib

    d = HERE / "flux"
    files = [d / c / f for c in ("source", "kustomize", "helm") for f in ("go.mod", "go.sum")] + [d / "build.sh"]
    key = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:12]
    return bin_dir().parents[1] / f"flux-{key}" / "bin"


def missing_binaries(names: Iterable[str] = BINARIES) -> list[str]:
    d = bin_dir()
    missing = [n for n in names if not os.access(d / n, os.X_OK)]
    if "kwok" in names and not (d.parent / "kwok-stages" / "pod-ready.yaml").is_file():
        missing.append("kwok-stages")
    return missing


# Ports free_port handed out, each still bound (not listening) by this process: see free_port.
_HELD: "collections.deque[socket.socket]" = collections.deque()


def free_port() -> int:
    """A loopback port for a daemon to listen on, reserved until the daemon takes it.

    The port stays bound here with SO_REUSEADDR and no listen(): the kernel then hands it to no other
    bind (another test's free_port, an ephemeral port), while the daemon, whose Go listener also sets
    SO_REUSEADDR, can still bind and listen on it (Linux allows that while neither socket listens
    first). Released after 256 later picks, long after any daemon here has bound. A plain bind-and-close
    left a window in which a parallel test's daemon took the port: Kueue then died with `bind: address
    already in use` while the webhook configuration pointed at another cluster's etcd (a 420 s Flux
    failure in CI)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    _HELD.append(s)
    while len(_HELD) > 256:
        _HELD.popleft().close()
    return s.getsockname()[1]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


# make_certs' files, made once per test process: file name -> bytes
_CERTS: dict[str, bytes] = {}
_CERT_FILES = ("ca.key", "ca.crt", "tls.key", "tls.crt", "sa.key", "sa.pub")


def make_certs(d: Path) -> None:
    """A throwaway CA, a serving certificate for 127.0.0.1/localhost (the API server's and Kueue's
    webhook server's), and the service-account signing key pair.

    Made by openssl once per test process and copied into each cluster's directory after: three RSA keys
    cost about 2 s of CPU per control plane (issue 32, CI time), and each cluster still has its own admin
    token, etcd and API server; nothing the tests check depends on the keys differing between clusters."""
    d.mkdir(parents=True, exist_ok=True)
    if _CERTS:
        for name, data in _CERTS.items():
            (d / name).write_bytes(data)
        return
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
             "-days", "2", "-subj", "/CN=orchgen-kubeenv-ca", cwd=d)
    _openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key", "-out", "tls.csr",
             "-subj", "/CN=localhost", cwd=d)
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "tls.crt", "-days", "2", "-extfile", "san.ext", cwd=d)
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=d)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)
    _CERTS.update({name: (d / name).read_bytes() for name in _CERT_FILES})


# libyaml's emitter where PyYAML has it: the applied charts run to megabytes
class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
    """Strings that Go's YAML reads as floats (the JupyterHub chart's quoted `checksum/auth-token: "3e36"`,
    a random hash) kept quoted for kubectl, as generator.yamlio does for the bundle's own files."""


resolve_numbers_as_go(_Dumper)
_DUMPER = _Dumper


# CRDs an API server of this build accepted in this process: digest of the object as applied ->
# (name, its stored etcd value, base64). See Cluster.apply_crds.
_CRD_STORE: dict[str, tuple[str, str]] = {}
# A folder the xdist workers of one pytest run share (tests/kubeenv/fixture.py sets it: the run's base
# temporary folder, gone with the run's others), or None (a serial run: the process is the run). What one
# worker learnt there (a CRD an API server accepted, a chart's `helm template` output) the others take
# instead of doing it again: on CI's 2 cores the three workers each paid every cold CRD apply (about 34 s
# per chart set) and every chart render (issue 32, CI time).
SHARED: Path | None = None


class shared_lock:
    """An exclusive lock on `name` in SHARED among the run's workers (a no-op without SHARED): the worker
    that takes it first does the work and records it; the others wait and then find it recorded, so the work
    is done once, not three times at once on the same two cores."""

    def __init__(self, name: str):
        self.path = SHARED / f"{name}.lock" if SHARED is not None else None
        self.fd: int | None = None

    def __enter__(self) -> "shared_lock":
        if self.path is not None:
            import fcntl

            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases the flock
            self.fd = None


def shared_read(name: str) -> str | None:
    if SHARED is None:
        return None
    try:
        return (SHARED / name).read_text()
    except FileNotFoundError:
        return None


def shared_write(name: str, text: str) -> None:
    """Written whole or not at all (a rename), so a reader never sees half of it."""
    if SHARED is None:
        return
    SHARED.mkdir(parents=True, exist_ok=True)
    tmp = SHARED / f".{name}.{os.getpid()}"
    tmp.write_text(text)
    tmp.rename(SHARED / name)
# kube-apiserver's default --etcd-prefix and the CRD resource's storage path under it
_CRD_PREFIX = "/registry/apiextensions.k8s.io/customresourcedefinitions/"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _crd_digest(o: dict[str, Any]) -> str:
    import hashlib

    return hashlib.sha256((str(bin_dir()) + json.dumps(o, sort_keys=True)).encode()).hexdigest()


class Cluster:
    """One control plane in `workdir`. Use as a context manager, or call start()/stop()."""

    def __init__(self, workdir: Path, admission_config: dict[str, Any] | None = None,
                 scheduler: bool = True, kwok: bool = True, controllers: bool = True, lws: bool = False,
                 dra: bool = False, hold_ready: tuple[str, ...] = (), volcano: bool = False):
        self.dir = workdir
        self.dra = dra  # serve resource.k8s.io (DRA_GATE, DRA_RUNTIME_CONFIG)
        self.bin = bin_dir()
        self.admission_config = admission_config
        self.with_scheduler = scheduler
        self.with_kwok = kwok
        self.with_controllers = controllers
        self.with_lws = lws  # run LeaderWorkerSet's controller when the bundle's lws release is applied
        self.with_volcano = volcano  # run Volcano's components when the bundle's volcano release is applied
        # namespaces whose pods KWOK leaves unready: the test marks them Ready (mark_ready) once the
        # controller that pod stands for runs here as a process, as a kubelet would once its readiness
        # probe passes (a Deployment is then not "ready" before its controller serves)
        self.hold_ready = tuple(hold_ready)
        self.procs: dict[str, subprocess.Popen] = {}
        self.kubeconfig = workdir / "kubeconfig"
        self.certs = workdir / "pki"
        self.kubectl_bin = shutil.which("kubectl") or str(Path(os.sys.executable).parent / "kubectl")
        self.webhook_port = 0
        self.lws_webhook_port = 0

    # -- processes ---------------------------------------------------------------------------
    def _spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        log = open(self.dir / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen(
            [str(self.bin / args[0]), *args[1:]], stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, cwd=self.dir, env={**os.environ, **(env or {})},
            start_new_session=True)

    def log(self, name: str, tail: int = 4000) -> str:
        p = self.dir / f"{name}.log"
        return p.read_text(errors="replace")[-tail:] if p.exists() else ""

    def _wait(self, what: str, ok, timeout: float, proc: str | None = None) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if proc and self.procs[proc].poll() is not None:
                raise RuntimeError(f"{proc} exited ({self.procs[proc].returncode}):\n{self.log(proc)}")
            try:
                if ok():
                    return
            except Exception:  # noqa: BLE001 - not up yet
                pass
            time.sleep(0.3)
        raise TimeoutError(f"{what} not ready after {timeout:.0f} s:\n{self.log(proc or '')}")

    def start(self) -> "Cluster":
        self.dir.mkdir(parents=True, exist_ok=True)
        make_certs(self.certs)
        c = self.certs
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        self._spawn("etcd", [
            "etcd", "--data-dir", str(self.dir / "etcd"), "--name", "default",
            "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-cluster", f"default=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync", "--log-level", "warn"])
        self._etcd = f"127.0.0.1:{etcd_port}"
        token = "orchgen-admin-" + base64.b32encode(os.urandom(10)).decode().lower()
        self._token, self._api = token, f"127.0.0.1:{api_port}"
        (c / "tokens.csv").write_text(f'{token},admin,admin-uid,"system:masters"\n')
        args = [
            "kube-apiserver", f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={api_port}",
            f"--tls-cert-file={c / 'tls.crt'}", f"--tls-private-key-file={c / 'tls.key'}",
            f"--client-ca-file={c / 'ca.crt'}", f"--token-auth-file={c / 'tokens.csv'}",
            f"--service-account-key-file={c / 'sa.pub'}",
            f"--service-account-signing-key-file={c / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.96.0.0/16", "--allow-privileged=true",
            "--authorization-mode=RBAC", f"--cert-dir={c}",
            "--v=1"]
        gates = [f"--feature-gates={DRA_GATE}"] if self.dra else []
        if self.dra:
            args += [*gates, f"--runtime-config={DRA_RUNTIME_CONFIG}"]
        if self.admission_config is not None:
            path = self.dir / "admission.yaml"
            path.write_text(yaml.safe_dump(self.admission_config))
            args.append(f"--admission-control-config-file={path}")
        self._spawn("kube-apiserver", args)
        ca = base64.b64encode((c / "ca.crt").read_bytes()).decode()
        self.kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "kubeenv",
            "clusters": [{"name": "kubeenv", "cluster": {
                "server": f"https://127.0.0.1:{api_port}", "certificate-authority-data": ca}}],
            "contexts": [{"name": "kubeenv", "context": {"cluster": "kubeenv", "user": "admin"}}],
            "users": [{"name": "admin", "user": {"token": token}}]}))
        self._wait("kube-apiserver", lambda: self.request("GET", "/readyz", timeout=10) is not None,
                   180, "kube-apiserver")
        kc = f"--kubeconfig={self.kubeconfig}"
        if self.with_controllers:
            self._spawn("kube-controller-manager", [
                "kube-controller-manager", kc, "--leader-elect=false", f"--controllers={CONTROLLERS}",
                f"--service-account-private-key-file={c / 'sa.key'}", f"--root-ca-file={c / 'ca.crt'}",
                "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
                "--use-service-account-credentials=false", f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}", "--concurrent-job-syncs=10", *gates])
        if self.with_scheduler:
            self._spawn("kube-scheduler", [
                "kube-scheduler", kc, "--leader-elect=false", "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}", f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}", *gates])
        if self.with_kwok:
            # the stages build.sh takes from KWOK's module (nodes Ready, bound pods Running); naming
            # them also keeps KWOK off a ~/.kwok/kwok.yaml of the user's
            stages = [f"--config={f}" for f in self._kwok_stages()]
            self._spawn("kwok", [
                "kwok", kc, *stages, "--manage-all-nodes=true",
                "--cidr=10.244.0.0/16",
                "--node-ip=10.0.0.1", f"--server-address=127.0.0.1:{free_port()}"])
        # the default ServiceAccount exists once the controller manager runs (pods need it)
        if self.with_controllers:
            self._wait("service-account controller",
                       lambda: self.request("GET", "/api/v1/namespaces/default/serviceaccounts/default",
                                            timeout=10) is not None,
                       120, "kube-controller-manager")
        return self

    def _kwok_stages(self) -> list[Path]:
        """KWOK's stage files; with hold_ready, pod-ready skips pods of those namespaces."""
        stages = sorted((self.bin.parent / "kwok-stages").glob("*.yaml"))
        if not self.hold_ready:
            return stages
        out = []
        (self.dir / "kwok-stages").mkdir(exist_ok=True)
        for f in stages:
            if f.name == "pod-ready.yaml":
                stage = yaml.safe_load(f.read_text())
                stage["spec"]["selector"]["matchExpressions"].append(
                    {"key": ".metadata.namespace", "operator": "NotIn", "values": list(self.hold_ready)})
                f = self.dir / "kwok-stages" / f.name
                f.write_text(yaml.safe_dump(stage, sort_keys=False))
            out.append(f)
        return out

    def mark_ready(self, namespace: str) -> int:
        """Every bound, not yet Ready pod of `namespace` becomes Running and Ready (the status KWOK's
        pod-ready stage writes); returns how many."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        done = 0
        for pod in (self.request("GET", f"/api/v1/namespaces/{namespace}/pods") or {}).get("items", []):
            conds = {c["type"]: c["status"] for c in pod.get("status", {}).get("conditions", [])}
            if not pod["spec"].get("nodeName") or conds.get("Ready") == "True" \
                    or pod["metadata"].get("deletionTimestamp"):
                continue
            status = {"phase": "Running", "startTime": now, "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": now}
                for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
                "containerStatuses": [{"name": c["name"], "image": c["image"], "imageID": "", "ready": True,
                                       "started": True, "restartCount": 0, "state": {"running": {"startedAt": now}}}
                                      for c in pod["spec"]["containers"]]}
            self.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}/status",
                         {"status": status}, content_type="application/merge-patch+json")
            done += 1
        return done

    def stop(self) -> None:
        # SIGKILL: the control plane is thrown away with its directory, so nothing needs a graceful
        # shutdown (kube-apiserver's drains for seconds, and a test waited for it every time)
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
        for p in self.procs.values():
            p.wait(10)

    def __enter__(self) -> "Cluster":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- kubectl -------------------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig), "KUBECACHEDIR": str(self.dir / "kubecache")}

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 120) -> subprocess.CompletedProcess:
        r = subprocess.run([self.kubectl_bin, *args], input=input, capture_output=True, text=True,
                           env=self.env(), timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
        return r

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                timeout: float = 60) -> Any:
        """One request to the API server, as kubectl makes it (the admin token, the cluster's CA): the parsed
        JSON answer, or None for an error status. For the harness's hot paths (a node's status patched per
        node, polls every half second): a kubectl process costs about 0.3 CPU-seconds, which a fleet of 100
        nodes multiplies into minutes of CI (issue 32). What the tests assert still goes through kubectl."""
        import http.client
        import ssl

        ctx = ssl.create_default_context(cafile=str(self.certs / "ca.crt"))
        conn = http.client.HTTPSConnection(self._api, timeout=timeout, context=ctx)
        try:
            data = None if body is None else json.dumps(body).encode()
            conn.request(method, path, body=data, headers={
                "Authorization": f"Bearer {self._token}", "Accept": "application/json",
                **({"Content-Type": content_type} if data is not None else {})})
            reply = conn.getresponse()
            raw = reply.read()
        except OSError:
            return None
        finally:
            conn.close()
        if reply.status >= 300:
            return None
        try:
            return json.loads(raw) if raw.strip().startswith(b"{") else raw.decode()
        except ValueError:
            return raw.decode(errors="replace")

    def _patch_node(self, name: str, patch: dict[str, Any], subresource: str = "") -> None:
        path = f"/api/v1/nodes/{name}" + (f"/{subresource}" if subresource else "")
        if self.request("PATCH", path, patch, content_type="application/merge-patch+json") is None:
            # the error's text, as kubectl gives it
            self.kubectl("patch", "node", name, *([f"--subresource={subresource}"] if subresource else []),
                         "--type=merge", "-p", json.dumps(patch))

    def apply(self, objs: list[dict[str, Any]] | str, manager: str = "orchgen-test",
              check: bool = True) -> subprocess.CompletedProcess:
        """`kubectl apply --server-side` (no dry run): the API server validates, defaults, runs its
        CEL rules and admission, and stores.

        Where the caller expects success (`check`), the same requests are made from here (`_apply`):
        the kubectl process and its parsing of megabytes of YAML cost more CPU than the API server's
        work on small objects (issue 32). Where a test reads the outcome (`check=False`: a refusal and
        its message), it is kubectl's own."""
        if check and not isinstance(objs, str):
            self._apply(objs, manager)
            return subprocess.CompletedProcess(["kubectl", "apply", "--server-side"], 0, "", "")
        text = objs if isinstance(objs, str) else yaml.dump_all(objs, Dumper=_DUMPER)
        return self.kubectl("apply", "--server-side", "--force-conflicts", f"--field-manager={manager}",
                            "-f", "-", input=text, check=check)

    def _discovery(self, refresh: bool = False) -> dict[tuple[str, str], tuple[str, str, bool]]:
        """(apiVersion, kind) -> (path prefix, resource, namespaced), from the API server's aggregated
        discovery (apidiscovery.k8s.io/v2, GA in 1.30: every group's resources in one answer), as
        kubectl's REST mapper reads it; cached until a kind is missing."""
        if refresh or not getattr(self, "_mapping", None):
            mapping: dict[tuple[str, str], tuple[str, str, bool]] = {}
            accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
            for root in ("/api", "/apis"):
                status, body = self._call("GET", root, accept=accept)
                assert status == 200, f"discovery {root}: {status} {body[:300]!r}"
                for group in json.loads(body).get("items", []):
                    name = group["metadata"].get("name", "")
                    for v in group.get("versions", []):
                        gv = f"{name}/{v['version']}" if name else v["version"]
                        for r in v.get("resources", []):
                            kind = (r.get("responseKind") or {}).get("kind")
                            if kind:
                                mapping[(gv, kind)] = (f"/apis/{gv}" if name else f"/api/{gv}", r["resource"],
                                                       r.get("scope") == "Namespaced")
            self._mapping = mapping
        return self._mapping

    def _call(self, method: str, path: str, body: bytes | None = None, content_type: str = "",
              accept: str = "application/json") -> tuple[int, bytes]:
        import http.client
        import ssl

        ctx = ssl.create_default_context(cafile=str(self.certs / "ca.crt"))
        conn = http.client.HTTPSConnection(self._api, timeout=120, context=ctx)
        try:
            conn.request(method, path, body=body, headers={
                "Authorization": f"Bearer {self._token}", "Accept": accept,
                **({"Content-Type": content_type} if content_type else {})})
            reply = conn.getresponse()
            return reply.status, reply.read()
        finally:
            conn.close()

    def _apply(self, objs: list[dict[str, Any]], manager: str) -> None:
        """Server-side apply of each object, in order, as `kubectl apply --server-side --force-conflicts
        --field-manager=M` makes it: PATCH application/apply-patch+yaml with force and strict field
        validation (kubectl's default --validate=strict), the namespace `default` for a namespaced object
        that names none (the kubeconfig's context names none), none for a cluster-scoped one."""
        errors = []
        for o in objs:
            key = (o["apiVersion"], o["kind"])
            mapping = self._discovery()
            if key not in mapping:
                mapping = self._discovery(refresh=True)
            md = o["metadata"]
            if key not in mapping:
                errors.append(f'no matches for kind "{o["kind"]}" in version "{o["apiVersion"]}" ({md.get("name")})')
                continue
            prefix, resource, namespaced = mapping[key]
            path = (f"{prefix}/namespaces/{md.get('namespace') or 'default'}/{resource}/{md['name']}" if namespaced
                    else f"{prefix}/{resource}/{md['name']}")
            query = urllib.parse.urlencode({"fieldManager": manager, "force": "true", "fieldValidation": "Strict"})
            status, body = self._call("PATCH", f"{path}?{query}", json.dumps(o).encode(),
                                      content_type="application/apply-patch+yaml")
            if status >= 300:
                try:
                    message = json.loads(body).get("message", "")
                except ValueError:
                    message = body.decode(errors="replace")[:500]
                errors.append(f"{o['kind']} {md.get('namespace', '')}/{md['name']}: {status} {message}")
        if errors:
            raise AssertionError("kubectl apply --server-side failed (as its requests, see Cluster.apply):\n"
                                 + "\n".join(errors)[-3000:])

    def cluster_scoped_kinds(self) -> set[str]:
        """Kinds the API server serves cluster-scoped (discovery, after the CRDs are in)."""
        return {kind for (_, kind), (_, _, namespaced) in self._discovery(refresh=True).items() if not namespaced}

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def list(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """`kubectl get RESOURCE[.GROUP] [-n NS] -o json`'s items, read here (a kubectl process per poll is
        CI time): RESOURCE is the plural ("pods", "workloads.kueue.x-k8s.io"), served at the group's
        preferred version (aggregated discovery lists it first). Each item gets its apiVersion and kind,
        as kubectl gives them."""
        name, _, group = resource.partition(".")
        found = [(gv, kind, prefix, ns_scoped) for (gv, kind), (prefix, res, ns_scoped) in self._discovery().items()
                 if res == name and (gv.rpartition("/")[0] if "/" in gv else "") == group]
        if not found:
            found = [(gv, kind, prefix, ns_scoped) for (gv, kind), (prefix, res, ns_scoped)
                     in self._discovery(refresh=True).items()
                     if res == name and (gv.rpartition("/")[0] if "/" in gv else "") == group]
        assert found, f"the server doesn't have a resource type {resource!r}"
        gv, kind, prefix, ns_scoped = found[0]
        path = f"{prefix}/namespaces/{namespace}/{name}" if ns_scoped and namespace else f"{prefix}/{name}"
        status, body = self._call("GET", path)
        assert status == 200, f"GET {path}: {status} {body[:500].decode(errors='replace')}"
        return [{"apiVersion": gv, "kind": kind, **i} for i in json.loads(body).get("items") or []]

    def read(self, o: dict[str, Any]) -> dict[str, Any]:
        """The stored form of the object `o` names (its apiVersion, kind, namespace and name), read as
        `kubectl get KIND NAME -o json` reads it: a GET on the path discovery gives (the namespace
        `default` for a namespaced object that names none), in this process (a kubectl process per object
        cost a bundle's check about 20 s: CI time). Fails with the API server's message where it is not
        stored."""
        key = (o["apiVersion"], o["kind"])
        mapping = self._discovery()
        if key not in mapping:
            mapping = self._discovery(refresh=True)
        md = o["metadata"]
        assert key in mapping, f'no matches for kind "{o["kind"]}" in version "{o["apiVersion"]}" ({md.get("name")})'
        prefix, resource, namespaced = mapping[key]
        path = (f"{prefix}/namespaces/{md.get('namespace') or 'default'}/{resource}/{md['name']}" if namespaced
                else f"{prefix}/{resource}/{md['name']}")
        status, body = self._call("GET", path)
        assert status == 200, f"GET {path}: {status} {body[:500].decode(errors='replace')}"
        return json.loads(body)

    def wait_for(self, what: str, ok, timeout: float = 120, every: float = 0.5) -> Any:
        end = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < end:
            last = ok()
            if last:
                return last
            time.sleep(every)
        raise TimeoutError(f"{what}: not after {timeout:.0f} s (last: {last!r})")

    # -- CRDs ----------------------------------------------------------------------------------
    def _etcd_call(self, op: str, body: dict[str, str]) -> dict[str, Any]:
        """etcd's v3 JSON gateway on its client URL (etcd serves it by default)."""
        import http.client

        conn = http.client.HTTPConnection(self._etcd, timeout=60)
        try:
            conn.request("POST", f"/v3/kv/{op}", body=json.dumps(body).encode(),
                         headers={"Content-Type": "application/json"})
            reply = conn.getresponse()
            raw = reply.read()
        finally:
            conn.close()
        assert reply.status == 200, f"etcd {op}: {reply.status} {raw[:300]!r}"
        return json.loads(raw)

    def apply_crds(self, crds: list[dict[str, Any]]) -> None:
        """Apply CRDs as `helm install` puts a chart's in, and wait until they are Established.

        A CRD this test run (this process, or another xdist worker of the run: SHARED) already had an API
        server of the same build accept, byte for byte the same object, is restored from what that API
        server stored (its etcd value, Established) instead of being applied again: server-side apply of
        a chart's multi-megabyte CRDs costs the API server seconds of CPU each time, and nearly every
        example installs the same charts (issue 32, CI time). The first apply of each CRD in a test run
        still goes through `kubectl apply --server-side`, so every CRD the tests use is proven accepted;
        restored ones are served by the API server from its watch of etcd, as after a restart."""
        keys = [_crd_digest(o) for o in crds]
        if all(k in _CRD_STORE for k in keys):
            return self._apply_crds(crds)
        import hashlib

        # one worker of the run applies a chart's CRDs cold; the others wait, then restore what it stored
        with shared_lock("crds-" + hashlib.sha256(" ".join(sorted(keys)).encode()).hexdigest()[:16]):
            for k in keys:
                got = k not in _CRD_STORE and shared_read(f"crd-{k}.json")
                if got:
                    name, value = json.loads(got)
                    _CRD_STORE[k] = (name, value)
            self._apply_crds(crds)

    def _apply_crds(self, crds: list[dict[str, Any]]) -> None:
        todo, restored = [], []
        for o in crds:
            key = _crd_digest(o)
            # restored only where this cluster has no such CRD yet: one it holds (an earlier apply here, with
            # its own uid and perhaps custom resources) is applied as kubectl would, never overwritten
            if key in _CRD_STORE and not self._etcd_call("range", {
                    "key": _b64(_CRD_PREFIX + _CRD_STORE[key][0]), "keys_only": True}).get("kvs"):
                name, value = _CRD_STORE[key]
                self._etcd_call("put", {"key": _b64(_CRD_PREFIX + name), "value": value})
                restored.append(name)
            else:
                todo.append(o)
        if todo:
            self.apply(todo)
        self.wait_established([o["metadata"]["name"] for o in crds])
        for o in todo:
            name = o["metadata"]["name"]
            got = self._etcd_call("range", {"key": _b64(_CRD_PREFIX + name)}).get("kvs") or []
            if got:
                _CRD_STORE[_crd_digest(o)] = (name, got[0]["value"])
                shared_write(f"crd-{_crd_digest(o)}.json", json.dumps([name, got[0]["value"]]))

    def wait_established(self, crds: list[str], timeout: float = 120) -> None:
        left = set(crds)

        def established() -> bool:
            # polled (`kubectl wait` errors out on a CRD whose status has no conditions yet), each CRD read
            # here until its Established condition is True: a kubectl process per poll cost more CPU than
            # parsing the CRDs' JSON (CI time)
            for name in sorted(left):
                got = self.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
                if isinstance(got, dict) and any(c.get("type") == "Established" and c.get("status") == "True"
                                                 for c in (got.get("status") or {}).get("conditions") or []):
                    left.discard(name)
            return not left

        if left:
            try:
                self.wait_for("CRDs Established", established, timeout=timeout, every=0.2)
            except TimeoutError as e:
                raise TimeoutError(f"{e}; not Established: {sorted(left)}") from None

    # -- nodes ---------------------------------------------------------------------------------
    def add_nodes(self, nodes: list[dict[str, Any]]) -> None:
        """Create fake nodes (KWOK makes them Ready): each {name, labels, taints, capacity}."""
        objs = []
        for n in nodes:
            cap = {"cpu": "64", "memory": "256Gi", "pods": "110", **n.get("capacity", {})}
            objs.append({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": n["name"], "labels": {
                    "kubernetes.io/hostname": n["name"], "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64", "type": "kwok", **n.get("labels", {})},
                    "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}},
                "spec": {"taints": n.get("taints", [])},
                "status": {"capacity": cap, "allocatable": cap}})
        # capacity is status: create, then set it through the status subresource as a kubelet does. Each
        # node one POST from here, as `kubectl create -f` makes it (a kubectl process and its OpenAPI fetch
        # cost seconds per cluster: issue 32, CI time); a refusal fails with the API server's message.
        for o in objs:
            status, body = self._call("POST", "/api/v1/nodes?fieldValidation=Strict", json.dumps(
                {k: v for k, v in o.items() if k != "status"}).encode(), content_type="application/json")
            assert status == 201, f"create node {o['metadata']['name']}: {status} {body[:500].decode(errors='replace')}"
        for o in objs:
            self._patch_node(o["metadata"]["name"], {"status": o["status"]}, subresource="status")
            # the API server's TaintNodesByCondition admission gives a new node the not-ready taint;
            # the node-lifecycle controller lifts it once the node is Ready. That controller does not
            # run here (see CONTROLLERS), so the taints are set as the node means them.
            self._patch_node(o["metadata"]["name"], {"spec": {"taints": o["spec"]["taints"] or None}})
        names = {n["name"] for n in nodes}

        def ready() -> bool:
            listed = self.request("GET", "/api/v1/nodes") or {"items": []}
            got = [n for n in listed["items"] if n["metadata"]["name"] in names]
            return len(got) == len(names) and all(
                any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
                for n in got)

        self.wait_for("nodes Ready", ready, timeout=120)

    # -- Kueue ---------------------------------------------------------------------------------
    def kueue_release_feature_gates(self) -> list[str]:
        """The feature gates the Kueue release's Deployment, as stored, passes its manager: the chart
        turns `controllerManager.featureGates` into one `--feature-gates=A=true,...` argument
        (charts/kueue templates/_helpers.tpl "kueue.featureGates"), so the manager here runs with the
        bundle's gates, whichever way (kubectl, Flux, Pulumi) the release went in."""
        deps = self.get("deployments", "-n", "kueue-system")["items"]
        return [g for d in deps for c in d["spec"]["template"]["spec"]["containers"] for a in c.get("args", [])
                if a.startswith("--feature-gates=") for g in a.split("=", 1)[1].split(",") if g]

    def start_kueue(self, config: dict[str, Any], port: int = 0) -> None:
        """Run Kueue's controller manager with `config` (a Configuration, as the chart's ConfigMap
        holds it) and the release's feature gates (`kueue_release_feature_gates`, plus overlay rule 6),
        its webhook server on 127.0.0.1 (at `port`, else a free one) with this cluster's
        serving certificate."""
        self.webhook_port = port or free_port()
        certdir = self.dir / "kueue-certs"
        certdir.mkdir(exist_ok=True)
        shutil.copy(self.certs / "tls.crt", certdir / "tls.crt")
        shutil.copy(self.certs / "tls.key", certdir / "tls.key")
        from tests.kubeenv import overlay

        metrics_certs = Path(overlay.KUEUE_METRICS_CERTS)
        if not (metrics_certs / "tls.crt").is_file():
            from tests._consumers import require

            require(os.access(metrics_certs.parent.parent.parent, os.W_OK) or os.geteuid() == 0,
                    f"Kueue 0.19 reads its metrics certificate from {metrics_certs} when its internal "
                    "certificate management is off: create it (tls.crt, tls.key) or run as root")
            tmp = metrics_certs.parent / f".certs.{os.getpid()}"
            tmp.mkdir(parents=True, exist_ok=True)
            _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key", "-out", "tls.crt",
                     "-days", "3650", "-subj", "/CN=kueue-metrics-orchgen-test", cwd=tmp)
            try:
                tmp.rename(metrics_certs)
            except OSError:  # another test made it first
                shutil.rmtree(tmp, ignore_errors=True)
        cfg = overlay.kueue_config(config, port=self.webhook_port, certdir=certdir,
                                   probe=free_port(), metrics=free_port())
        path = self.dir / "kueue-config.yaml"
        path.write_text(yaml.safe_dump(cfg))
        gates = [*self.kueue_release_feature_gates(), overlay.KUEUE_FEATURE_GATES]
        self._spawn("kueue", ["kueue", f"--config={path}", "--zap-log-level=2",
                              f"--feature-gates={','.join(gates)}"],
                    env={"KUBECONFIG": str(self.kubeconfig), "POD_NAMESPACE": "kueue-system"})
        self._wait("kueue webhook server", lambda: socket.create_connection(
            ("127.0.0.1", self.webhook_port), timeout=1).close() is None, 120, "kueue")

    def start_lws(self, config: dict[str, Any]) -> None:
        """Run LeaderWorkerSet's controller manager (tests/kubeenv/lws/build.sh) with `config` (the
        Configuration the lws release's ConfigMap holds), its webhooks served on 127.0.0.1 with this
        cluster's serving certificate (overlay.lws_config)."""
        from tests.kubeenv import overlay

        self.lws_webhook_port = free_port()
        certdir = self.dir / "lws-certs"
        certdir.mkdir(exist_ok=True)
        shutil.copy(self.certs / "tls.crt", certdir / "tls.crt")
        shutil.copy(self.certs / "tls.key", certdir / "tls.key")
        cfg = overlay.lws_config(config, port=self.lws_webhook_port, certdir=certdir,
                                 probe=free_port(), metrics=free_port())
        path = self.dir / "lws-config.yaml"
        path.write_text(yaml.safe_dump(cfg))
        log = open(self.dir / "lws.log", "ab")
        self.procs["lws"] = subprocess.Popen(
            [str(lws_binary()), f"--config={path}", "--zap-log-level=2"], stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, cwd=self.dir, start_new_session=True,
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig), "POD_NAMESPACE": "lws-system"})
        self._wait("lws webhook server", lambda: socket.create_connection(
            ("127.0.0.1", self.lws_webhook_port), timeout=1).close() is None, 120, "lws")

    def start_volcano(self, rendered: list[dict[str, Any]], hooks: list[dict[str, Any]]) -> None:
        """Run Volcano's webhook server, controller manager and scheduler (tests/kubeenv/volcano/build.sh)
        as the volcano release `rendered` deploys them (overlay rule 16), its webhook configurations
        `hooks` pointed at the loopback webhook server first (the server waits for them to exist)."""
        from tests.kubeenv import overlay

        port = free_port()
        self.apply(overlay.loopback_webhooks(hooks, port, self.ca_bundle()))
        procs = overlay.volcano_processes(rendered, self.dir / "volcano", self.certs, self.kubeconfig,
                                          port, free_port)
        for name, args, env in procs:
            log = open(self.dir / f"{name}.log", "ab")
            self.procs[name] = subprocess.Popen(
                [str(volcano_bin_dir() / name), *args], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, cwd=self.dir, start_new_session=True, env={**os.environ, **env})
            if name == "vc-webhook-manager":
                self._wait("volcano webhook server", lambda: socket.create_connection(
                    ("127.0.0.1", port), timeout=1).close() is None, 120, name)

    def wait_volcano(self) -> None:
        """Volcano's scheduler is up: its `default` queue exists (it makes it at start). Called once the
        bundle is in (bundle.apply_bundle), so the releases after Volcano's do not wait for it."""
        self._wait("volcano's default queue", lambda: self.request(
            "GET", "/apis/scheduling.volcano.sh/v1beta1/queues/default", timeout=10) is not None, 120, "vc-scheduler")

    def start_flux(self) -> None:
        """Run Flux's source-, kustomize- and helm-controller as `flux install` deploys them (one
        replica each, watching every namespace, RUNTIME_NAMESPACE flux-system), with this cluster's
        admin credentials (Flux's own ClusterRoleBinding gives them cluster-admin). source-controller
        serves its artifacts on a loopback port and advertises that address (overlay rule 13), which
        the other two fetch from. Flux's CRDs are not applied here: that is the bootstrap's part."""
        fb = flux_bin_dir()
        storage = self.dir / "flux-artifacts"
        storage.mkdir(exist_ok=True)
        self.flux_storage_port = free_port()
        env = {"KUBECONFIG": str(self.kubeconfig), "RUNTIME_NAMESPACE": "flux-system"}
        common = ["--enable-leader-election=false", "--watch-all-namespaces=true", "--log-level=debug",
                  "--log-encoding=console"]
        for name, extra in (
                ("source-controller", [f"--storage-path={storage}",
                                       f"--storage-addr=127.0.0.1:{self.flux_storage_port}",
                                       f"--storage-adv-addr=127.0.0.1:{self.flux_storage_port}",
                                       "--requeue-dependency=5s"]),
                ("kustomize-controller", ["--requeue-dependency=5s"]),
                ("helm-controller", ["--requeue-dependency=5s"])):
            log = open(self.dir / f"{name}.log", "ab")
            self.procs[name] = subprocess.Popen(
                [str(fb / name), *common, *extra, f"--metrics-addr=127.0.0.1:{free_port()}",
                 f"--health-addr=127.0.0.1:{free_port()}"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.dir,
                start_new_session=True, env={**os.environ, **env})
        self._wait("source-controller's artifact server", lambda: socket.create_connection(
            ("127.0.0.1", self.flux_storage_port), timeout=1).close() is None, 120, "source-controller")

    def ca_bundle(self) -> str:
        return base64.b64encode((self.certs / "ca.crt").read_bytes()).decode()
