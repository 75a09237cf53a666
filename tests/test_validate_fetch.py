"""`orchgen validate` with no flags: the CRDs and chart defaults of the chart versions the bundle
pins, fetched from a Helm repository into the user cache (generator/validate/charts.py).

The repository is real HTTP on loopback: ../shared/charts packaged (a gzipped tar of each chart
directory under its name, as `helm package` writes it) with an index.yaml as `helm repo index`
writes it (name, version, urls, sha256 digest), served by http.server; ORCHGEN_CHART_MIRROR points
every release at it. Its findings must equal those with --crds/--chart-defaults from
../shared/reference. The OCI path runs against Debian's docker-registry (the CNCF distribution
server) on loopback, the charts pushed as `helm push` does (config and chart layer, OCI manifest).
"""
from __future__ import annotations

import functools
import hashlib
import io
import os
import subprocess
import tarfile
import threading
import urllib.parse
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from ._consumers import REPO, charts_dir, crd_paths, reference_dir, require
from tests.support import orchgen_argv


def _package(chart_dir: Path, name: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(chart_dir.rglob("*")):
            info = tar.gettarinfo(str(path), arcname=f"{name}/{path.relative_to(chart_dir).as_posix()}")
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if path.is_file():
                with path.open("rb") as f:
                    tar.addfile(info, f)
            elif path.is_dir():
                tar.addfile(info)
    return buf.getvalue()


@pytest.fixture(scope="module")
def chart_repo(tmp_path_factory):
    """../shared/charts as a Helm repository on 127.0.0.1; yields its URL and a hit counter."""
    charts = charts_dir()
    root = tmp_path_factory.mktemp("chart-repo")
    entries: dict[str, list] = {}
    for chart_yaml in sorted(charts.glob("*/*/Chart.yaml")):
        meta = yaml.safe_load(chart_yaml.read_text())
        name, version = meta["name"], str(meta["version"])
        data = _package(chart_yaml.parent, name)
        (root / f"{name}-{version}.tgz").write_bytes(data)
        entries.setdefault(name, []).append({"name": name, "version": version, "apiVersion": meta.get("apiVersion"),
                                             "urls": [f"{name}-{version}.tgz"],
                                             "digest": hashlib.sha256(data).hexdigest()})
    (root / "index.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "entries": entries}))
    hits: list[str] = []

    class Handler(SimpleHTTPRequestHandler):
        def log_message(self, *args):  # quiet, but count what was asked
            hits.append(self.path)

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", hits
    server.shutdown()


def _validate(*args, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([*orchgen_argv(), "validate", *map(str, args)],
                          capture_output=True, text=True, env={**os.environ, **env}, cwd=REPO)


# Kinds whose CRDs no chart a bundle pins ships: the GitOps controller's (installed by the site) and
# nv-ipam's IPPool (the Network Operator applies it itself, not from its chart). With the reference
# directory they are checked; fetched, each object of theirs is a "not checked" warning.
NOT_IN_PINNED_CHARTS = ("argoproj.io/", "toolkit.fluxcd.io/", "nv-ipam.nvidia.com/")


def _findings(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if not line.startswith("notice: ") and " files checked" not in line
            and not any(f"no CRD for {g}" in line for g in NOT_IN_PINNED_CHARTS)]


@pytest.mark.parametrize("example", ["research-lab", "cloud-training", "baremetal-k8s-training"])
def test_validate_without_flags_equals_reference(example, chart_repo, tmp_path):
    url, hits = chart_repo
    out = tmp_path / "out"
    subprocess.run([*orchgen_argv(), "plan", f"examples/{example}.yaml", "-o", out],
                   check=True, capture_output=True, cwd=REPO)
    # a bundle with one wrong values key and one wrong field of a custom resource: both checks must run
    values = out / "kubernetes/helm/kueue.values.yaml"
    if values.exists():
        values.write_text(values.read_text() + "notAKueueKey: 1\n")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "ORCHGEN_CHART_MIRROR": url}
    ref = reference_dir()
    with_ref = _validate(out, *[a for p in crd_paths() for a in ("--crds", p)], "--chart-defaults", ref, env=env)
    before = len(hits)
    fetched = _validate(out, env=env)
    assert fetched.returncode == with_ref.returncode, fetched.stdout + fetched.stderr
    assert _findings(fetched.stdout) == _findings(with_ref.stdout), fetched.stdout
    assert any(h.endswith(".tgz") for h in hits[before:]) and "index.yaml" in "".join(hits[before:])
    if values.exists():
        assert any("notAKueueKey" in f for f in _findings(fetched.stdout))
    assert "no --crds" not in fetched.stdout and "no --chart-defaults" not in fetched.stdout
    # the second run reads the cache only: no request, same findings, also with --offline
    before = len(hits)
    again = _validate(out, "--offline", env={**env, "ORCHGEN_CHART_MIRROR": "http://127.0.0.1:9/"})
    assert _findings(again.stdout) == _findings(fetched.stdout) and len(hits) == before, again.stderr
    cached = list((tmp_path / "cache/orchgen/charts").glob("*/*/*/Chart.yaml"))
    assert cached


def test_offline_with_an_empty_cache_says_what_is_missing(tmp_path):
    out = tmp_path / "out"
    subprocess.run([*orchgen_argv(), "plan", "examples/research-lab.yaml", "-o", out],
                   check=True, capture_output=True, cwd=REPO)
    proc = _validate(out, "--offline", env={"XDG_CACHE_HOME": str(tmp_path / "empty")})
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("orchgen: --offline: not in the chart cache ")
    assert "gpu-operator v26.7.0" in proc.stderr and "kueue 0.19.2" in proc.stderr


def test_unreachable_repository_is_one_line(tmp_path):
    out = tmp_path / "out"
    subprocess.run([*orchgen_argv(), "plan", "examples/research-lab.yaml", "-o", out],
                   check=True, capture_output=True, cwd=REPO)
    proc = _validate(out, env={"XDG_CACHE_HOME": str(tmp_path / "c"), "ORCHGEN_CHART_MIRROR": "http://127.0.0.1:9/"})
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    # the first release validate needs (its install order) is the one it names
    first = yaml.safe_load((out / "kubernetes/helm/releases.yaml").read_text())["releases"][0]
    assert f"cannot fetch {first['chart']} {first['version']} from http://127.0.0.1:9/" in proc.stderr, proc.stderr
    assert "--no-fetch" in proc.stderr
    skip = _validate(out, "--no-fetch", env={"XDG_CACHE_HOME": str(tmp_path / "c")})
    assert skip.returncode == 0 and "notice: no --crds" in skip.stdout


# --- OCI: a real registry (Debian's docker-registry, the CNCF distribution server) on loopback ----

def _push_chart(base: str, name: str, version: str, archive: bytes, meta: dict) -> None:
    """Push a chart as `helm push` does: config and chart layer blobs, then the OCI manifest."""
    import json
    import urllib.request

    def blob(data: bytes) -> dict:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        start = urllib.request.urlopen(urllib.request.Request(f"{base}/v2/charts/{name}/blobs/uploads/",
                                                              method="POST", data=b""))
        location = urllib.parse.urljoin(base, start.headers["Location"])
        sep = "&" if "?" in location else "?"
        urllib.request.urlopen(urllib.request.Request(f"{location}{sep}digest={digest}", method="PUT", data=data,
                                                      headers={"Content-Type": "application/octet-stream"}))
        return {"digest": digest, "size": len(data)}

    config = json.dumps({"name": name, "version": version, "apiVersion": meta.get("apiVersion", "v2")}).encode()
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.cncf.helm.config.v1+json", **blob(config)},
                "layers": [{"mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip", **blob(archive)}]}
    urllib.request.urlopen(urllib.request.Request(
        f"{base}/v2/charts/{name}/manifests/{version.replace('+', '_')}", method="PUT",
        data=json.dumps(manifest).encode(), headers={"Content-Type": manifest["mediaType"]}))


@functools.cache
def research_lab_releases() -> frozenset[tuple[str, str]]:
    """(chart, version) of every release research-lab's bundle installs: what the registry must serve."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([*orchgen_argv(), "plan", "examples/research-lab.yaml", "-o", f"{tmp}/out",
                        "-q"], check=True, capture_output=True, cwd=REPO)
        rels = yaml.safe_load(Path(f"{tmp}/out/kubernetes/helm/releases.yaml").read_text())["releases"]
    return frozenset((r["chart"], str(r["version"])) for r in rels)


@pytest.fixture(scope="module")
def oci_registry(tmp_path_factory):
    import shutil
    import socket
    import time
    import urllib.error
    import urllib.parse  # noqa: F401 (used by _push_chart)
    import urllib.request

    server = shutil.which("docker-registry")
    require(server, "docker-registry not installed (apt-get install docker-registry)")
    charts = charts_dir()
    root = tmp_path_factory.mktemp("oci")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (root / "config.yml").write_text(yaml.safe_dump({
        "version": 0.1, "log": {"level": "error"}, "storage": {"filesystem": {"rootdirectory": str(root / "data")}},
        "http": {"addr": f"127.0.0.1:{port}"}}))
    proc = subprocess.Popen([server, "serve", str(root / "config.yml")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{base}/v2/", timeout=1)
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.1)
        for chart_yaml in sorted(charts.glob("*/*/Chart.yaml")):
            meta = yaml.safe_load(chart_yaml.read_text())
            if (chart_yaml.parent.parent.name, chart_yaml.parent.name) in research_lab_releases():
                _push_chart(base, meta["name"], str(meta["version"]), _package(chart_yaml.parent, meta["name"]), meta)
        yield f"oci://127.0.0.1:{port}/charts"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_validate_pulls_from_an_oci_registry(oci_registry, tmp_path):
    out = tmp_path / "out"
    subprocess.run([*orchgen_argv(), "plan", "examples/research-lab.yaml", "-o", out],
                   check=True, capture_output=True, cwd=REPO)
    values = out / "kubernetes/helm/kueue.values.yaml"
    values.write_text(values.read_text() + "notAKueueKey: 1\n")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "ORCHGEN_CHART_MIRROR": oci_registry}
    ref = reference_dir()
    with_ref = _validate(out, *[a for p in crd_paths() for a in ("--crds", p)], "--chart-defaults", ref, env=env)
    fetched = _validate(out, env=env)
    assert fetched.returncode == with_ref.returncode == 1, fetched.stdout + fetched.stderr
    assert _findings(fetched.stdout) == _findings(with_ref.stdout), fetched.stdout
    assert any("notAKueueKey" in f for f in _findings(fetched.stdout))
    assert len(list((tmp_path / "cache/orchgen/charts").glob("*/*/*/.orchgen-crds"))) == len(research_lab_releases())
