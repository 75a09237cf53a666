"""Issue 40, "safe on a stranger's bundle": what `orchgen validate` fetches, where it unpacks it, and
which files `plan --check/--diff` and `validate` read from a bundle folder.

A bundle in CI was reviewed by no one: its releases.yaml names the chart, version and repository
validate fetches, and its files may be symbolic links anywhere. Each case runs the CLI as CI does
and wants exit 2 with one printable stderr line naming file:line:field (or a finding line, exit 1),
nothing written outside the chart cache, no request to a host the bundle picked, and no byte of a
linked file's content in the output. Servers are on 127.0.0.1 only (ORCHGEN_CHART_MIRROR is the
user's documented way to point validate at one).
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import socket
import subprocess
import tarfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from .support import run_cli
from .test_hostile_ci import REPO, assert_printable, refused

KUEUE = ("kueue", "0.19.2", "oci://registry.k8s.io/kueue/charts")  # a chart the catalog pins, and its home


def run(*args, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return run_cli(args, capture_output=True, text=True, cwd=REPO, timeout=timeout, env=env)


def small_bundle(root: Path, chart: str, version: str, repo: str) -> Path:
    """A bundle of one Helm release (what validate fetches is all that matters here)."""
    helm = root / "kubernetes" / "helm"
    helm.mkdir(parents=True)
    (helm / "x.values.yaml").write_text("{}\n")
    (helm / "releases.yaml").write_text(yaml.safe_dump({"releases": [
        {"name": "x", "namespace": "x", "repo": repo, "chart": chart, "version": version,
         "values": "x.values.yaml", "crds": [], "dependsOn": []}]}, sort_keys=False))
    return root


def chart_archive(name: str, version: str, extra: list[tarfile.TarInfo | tuple[tarfile.TarInfo, bytes]] = (),
                  top: str | None = None) -> bytes:
    """A chart packed as `helm package` packs it: <name>/Chart.yaml, values.yaml, plus `extra` members
    (`top`: another folder name than the chart's, as a hostile archive would have)."""
    buf = io.BytesIO()
    top = top or name
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for rel, data in ((f"{top}/Chart.yaml", f"apiVersion: v2\nname: {name}\nversion: {version}\n".encode()),
                          (f"{top}/values.yaml", b"a: 1\n")):
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for member in extra:
            info, data = member if isinstance(member, tuple) else (member, b"")
            tar.addfile(info, io.BytesIO(data) if data else None)
    return buf.getvalue()


class Repo:
    """A Helm repository on 127.0.0.1: `files` maps a path to bytes (or to a callable that writes the
    response itself); `connections` counts every TCP connection, HTTP or not."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.connections = 0
        self.stop = threading.Event()
        repo = self

        class Handler(BaseHTTPRequestHandler):
            def handle(self) -> None:
                repo.connections += 1
                super().handle()

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                body = repo.files.get(self.path)
                if callable(body):
                    body(self)
                    return
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def serve_chart(self, name: str, version: str, archive: bytes, listed_name: str | None = None) -> None:
        self.files[f"/{name}-{version}.tgz".replace("../", "")] = archive
        entry = {"name": listed_name or name, "version": version, "apiVersion": "v2",
                 "urls": [f"{name}-{version}.tgz".replace("../", "")], "digest": hashlib.sha256(archive).hexdigest()}
        self.files["/index.yaml"] = yaml.safe_dump({"apiVersion": "v1", "entries": {listed_name or name: [entry]}}
                                                  ).encode()

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def repo():
    r = Repo()
    yield r
    r.close()


def cache_env(tmp_path: Path, repo: Repo | None = None) -> dict[str, str]:
    env = {"XDG_CACHE_HOME": str(tmp_path / "home" / "cache")}
    if repo is not None:
        env["ORCHGEN_CHART_MIRROR"] = repo.url
    return env


def files_under(path: Path) -> set[str]:
    return {p.relative_to(path).as_posix() for p in path.rglob("*")} if path.exists() else set()


# ---------------------------------------------------------------- chart names, versions, the cache


@pytest.mark.parametrize("chart, version, field", [
    ("../../../../.local/lib/python3.11/site-packages", "sitecustomize", "chart"),
    ("kueue/../../../../../escape", "0.19.2", "chart"),
    ("kueue", "../../../../escape", "version"),
    ("kueue", "sitecustomize", "version"),
    ("kueue", "0.19.2/../..", "version"),
])
def test_a_chart_name_or_version_with_a_path_is_refused_before_any_fetch(tmp_path, repo, chart, version, field):
    """The critical one: a chart `../../..` unpacked `<cache>/<chart>/<version>` into site-packages."""
    repo.serve_chart(chart, version, chart_archive(chart, version, top="chart"))
    bundle = small_bundle(tmp_path / "b", chart, version, KUEUE[2])
    before = files_under(tmp_path / "home")
    refused(run("validate", bundle, env=cache_env(tmp_path, repo)),
            rf"^orchgen: kubernetes/helm/releases\.yaml:\d+: releases\[0\]\.{field}: not a ")
    assert repo.connections == 0, "fetched before the name was checked"
    assert files_under(tmp_path / "home") == before and not (tmp_path / "escape").exists()


def test_validate_findings_name_a_bad_chart_name_without_fetching(tmp_path):
    bundle = small_bundle(tmp_path / "b", "../../evil", "1.0.0", KUEUE[2])
    proc = run("validate", "--no-fetch", bundle)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(r"^kubernetes/helm/releases\.yaml:\d+: release x: chart \.\./\.\./evil is not a Helm chart name",
                     proc.stdout, re.M), proc.stdout


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "", size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, link, size
    return info


@pytest.mark.parametrize("what, member, pattern", [
    ("symlink out", _member("kueue/templates/x.yaml", tarfile.SYMTYPE, "/etc/passwd"), "a link, device or FIFO"),
    ("symlink in", _member("kueue/templates/x.yaml", tarfile.SYMTYPE, "../values.yaml"), "a link, device or FIFO"),
    ("hardlink", _member("kueue/templates/y.yaml", tarfile.LNKTYPE, "kueue/values.yaml"), "a link, device or FIFO"),
    ("device", _member("kueue/dev", tarfile.CHRTYPE), "a link, device or FIFO"),
    ("fifo", _member("kueue/fifo", tarfile.FIFOTYPE), "a link, device or FIFO"),
    ("dotdot", (_member("kueue/../../../escape.txt", size=2), b"x\n"), "a path outside its chart"),
    ("absolute", (_member("/tmp/orchgen-escape.txt", size=2), b"x\n"), "a path outside its chart"),
    ("second top", (_member("other/Chart.yaml", size=2), b"x\n"), "more than one top directory"),
])
def test_an_archive_with_links_devices_or_paths_out_is_refused(tmp_path, repo, what, member, pattern):
    name, version, home = KUEUE
    repo.serve_chart(name, version, chart_archive(name, version, [member]))
    proc = run("validate", small_bundle(tmp_path / "b", name, version, home), env=cache_env(tmp_path, repo))
    refused(proc, rf"^orchgen: validate: cannot fetch kueue 0\.19\.2 from {re.escape(repo.url)}: .*{pattern}")
    cached = files_under(tmp_path / "home" / "cache" / "orchgen" / "charts")
    assert not any(p.endswith("Chart.yaml") for p in cached), cached
    assert not (tmp_path / "escape.txt").exists() and not Path("/tmp/orchgen-escape.txt").exists()


def _zeros_gzip_tar(name: str, version: str, size: int) -> bytes:
    """A chart whose one extra file is `size` zero bytes: a few hundred KB of gzip."""
    data = f"apiVersion: v2\nname: {name}\nversion: {version}\n".encode()
    raw = _member(f"{name}/Chart.yaml", size=len(data)).tobuf(tarfile.GNU_FORMAT) + data + bytes(-len(data) % 512)
    header = _member(f"{name}/big.bin", size=size).tobuf(tarfile.GNU_FORMAT)
    zlib_obj = __import__("zlib").compressobj(1, wbits=31)
    out = [zlib_obj.compress(raw + header)]
    zero = bytes(1 << 20)
    for _ in range(size >> 20):
        out.append(zlib_obj.compress(zero))
    out.append(zlib_obj.compress(bytes(-size % 512 + 1024)))
    out.append(zlib_obj.flush())
    return b"".join(out)


def test_a_small_gzip_that_expands_past_the_cap_is_refused(tmp_path, repo):
    from generator.validate import charts

    name, version, home = KUEUE
    archive = _zeros_gzip_tar(name, version, charts.MAX_UNPACKED + (1 << 20))
    assert len(archive) < charts.MAX_ARCHIVE // 20
    repo.serve_chart(name, version, archive)
    start = time.monotonic()
    proc = run("validate", small_bundle(tmp_path / "b", name, version, home), env=cache_env(tmp_path, repo))
    refused(proc, r"cannot fetch kueue 0\.19\.2 from .*: kueue 0\.19\.2: the archive unpacks to more than 256 MiB")
    assert time.monotonic() - start < 30
    assert sum(p.stat().st_size for p in (tmp_path / "home").rglob("*") if p.is_file()) < 1 << 20


def test_the_unpacking_cap_also_holds_a_lying_stream(tmp_path):
    """A pax header (read into memory by tarfile) that expands far: the decompressed stream itself is capped."""
    from generator.validate import charts

    raw = gzip.compress(bytes(4 << 20), 1)
    with pytest.raises(charts.FetchError, match="unpacks to more than"):
        stream = charts._Capped(gzip.GzipFile(fileobj=io.BytesIO(raw)), 1 << 20)
        while stream.read(1 << 16):
            pass


def test_the_cache_is_content_addressed_and_confined(tmp_path, repo, monkeypatch):
    from generator.validate import charts

    name, version, home = KUEUE
    archive = chart_archive(name, version)
    repo.serve_chart(name, version, archive)
    bundle = small_bundle(tmp_path / "b", name, version, home)
    env = cache_env(tmp_path, repo)
    proc = run("validate", bundle, env=env)
    assert proc.returncode in (0, 1) and not proc.stderr, proc.stderr
    root = tmp_path / "home/cache/orchgen/charts"
    digest = hashlib.sha256(archive).hexdigest()
    assert (root / "blobs/sha256" / digest / "Chart.yaml").is_file()
    assert (root / "refs/registry.k8s.io_kueue_charts/kueue/0.19.2").read_text().strip() == digest
    # a ref that names no digest (or a path) is no cache entry: --offline says it is missing
    (root / "refs/registry.k8s.io_kueue_charts/kueue/0.19.2").write_text("../../../../..\n")
    refused(run("validate", bundle, "--offline", env=env), r"--offline: not in the chart cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / "cache"))
    with pytest.raises(charts.FetchError, match="outside the chart cache"):
        charts._confined("..", "..", "escape")
    with pytest.raises(charts.FetchError):
        charts.blob_dir("../" + "0" * 61)


# ---------------------------------------------------------------- where validate fetches from


def test_plain_http_in_a_bundle_is_refused_without_a_request(tmp_path, repo):
    name, version, _ = KUEUE
    repo.serve_chart(name, version, chart_archive(name, version))
    bundle = small_bundle(tmp_path / "b", name, version, repo.url)
    refused(run("validate", bundle, env=cache_env(tmp_path)),
            r"^orchgen: kubernetes/helm/releases\.yaml:\d+: releases\[0\]\.repo: not an https:// Helm repository")
    assert repo.connections == 0


@pytest.mark.parametrize("bundle_repo", ["https://127.0.0.1:{port}/charts", "oci://127.0.0.1:{port}/charts",
                                         "https://charts.example.invalid/"])
def test_a_repository_the_catalog_does_not_pin_is_refused_without_a_request(tmp_path, repo, bundle_repo):
    name, version, _ = KUEUE
    url = bundle_repo.format(port=repo.server.server_address[1])
    bundle = small_bundle(tmp_path / "b", name, version, url)
    line = refused(run("validate", bundle, env=cache_env(tmp_path)),
                   r"^orchgen: kubernetes/helm/releases\.yaml:\d+: releases\[0\]\.repo: .* is not the repository "
                   r"orchgen's catalog pins for chart kueue \(oci://registry\.k8s\.io/kueue/charts\)")
    assert "--allow-repo" in line
    assert repo.connections == 0


def test_allow_repo_admits_a_repository(tmp_path, repo):
    name, version, _ = KUEUE
    repo.serve_chart(name, version, chart_archive(name, version))
    bundle = small_bundle(tmp_path / "b", name, version, "https://charts.example.invalid/")
    proc = run("validate", bundle, "--allow-repo", "https://charts.example.invalid", env=cache_env(tmp_path, repo))
    assert proc.returncode in (0, 1) and not proc.stderr, proc.stderr
    assert repo.connections > 0
    refused(run("validate", bundle, "--allow-repo", "http://charts.example.invalid", env=cache_env(tmp_path)),
            r"^orchgen: --allow-repo: http://charts\.example\.invalid: not an https:// Helm repository")


def test_a_redirect_to_plain_http_is_not_followed(tmp_path, repo):
    """Without the mirror every request and redirect is https; the mirror's redirects stay on http(s)."""
    from generator.validate import charts

    name, version, home = KUEUE

    def redirect(handler) -> None:
        handler.send_response(302)
        handler.send_header("Location", "ftp://127.0.0.1/index.yaml")
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    repo.files["/index.yaml"] = redirect
    proc = run("validate", small_bundle(tmp_path / "b", name, version, home), env=cache_env(tmp_path, repo))
    refused(proc, r"cannot fetch kueue 0\.19\.2 from .*: redirected to ftp://127.0.0.1/index.yaml: only https:// "
                  r"and http://")
    request = __import__("urllib.request").request.Request("https://charts.example.invalid/index.yaml")
    with pytest.raises(charts.FetchError, match=r"redirected to http://127.0.0.1/index.yaml: only https://$"):
        charts._Redirects(plain_http=False).redirect_request(request, None, 302, "Found", {},
                                                             "http://127.0.0.1/index.yaml")
    fetch = charts._Fetch(charts._Deadline(5), plain_http=False)
    with pytest.raises(charts.FetchError, match=r"only https:// URLs \(http:// only through ORCHGEN_CHART_MIRROR\)"):
        fetch.get(repo.url + "/index.yaml", 100)


def test_a_slow_server_ends_within_the_deadline(tmp_path):
    """A server that sends one byte every 2 seconds (headers included) never trips a read timeout:
    the deadline of the whole fetch ends it, with exit 2 and one line."""
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def trickle(conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100000:
                if stop.wait(2):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=trickle, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        name, version, home = KUEUE
        env = {**cache_env(tmp_path), "ORCHGEN_CHART_MIRROR": f"http://127.0.0.1:{port}",
               "ORCHGEN_FETCH_DEADLINE_S": "3"}
        start = time.monotonic()
        proc = run("validate", small_bundle(tmp_path / "b", name, version, home), env=env, timeout=30)
        took = time.monotonic() - start
    finally:
        stop.set()
        listener.close()
    refused(proc, r"cannot fetch kueue 0\.19\.2 from http://127\.0\.0\.1:\d+: took longer than 3 s "
                  r"\(set ORCHGEN_FETCH_DEADLINE_S to allow more\)")
    assert took < 15, took


def test_a_download_past_its_cap_is_refused(tmp_path, repo, monkeypatch):
    from generator.validate import charts

    repo.files["/index.yaml"] = b"x" * 5000
    fetch = charts._Fetch(charts._Deadline(5), plain_http=True)
    with pytest.raises(charts.FetchError, match="larger than"):
        fetch.get(repo.url + "/index.yaml", 4096)

    def no_length(handler) -> None:  # no Content-Length: the cap holds while reading
        handler.send_response(200)
        handler.end_headers()
        handler.wfile.write(b"y" * 10000)

    repo.files["/stream"] = no_length
    with pytest.raises(charts.FetchError, match="larger than"):
        fetch.get(repo.url + "/stream", 4096)


# ---------------------------------------------------------------- links out of a bundle folder

SECRET = "leakedvalue4711"  # no token shape (mask_urls would hide one): any echo of it is a leak
SECRET_YAML = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {SECRET}\n  namespace: {SECRET}\n"


@pytest.fixture(scope="module")
def dev_bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dev") / "out"
    proc = run("plan", REPO / "examples" / "research-lab.yaml", "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    return out


def _linked_copy(src: Path, dest: Path, rel: str, target: Path) -> Path:
    import shutil

    shutil.copytree(src, dest)
    (dest / rel).unlink()
    (dest / rel).symlink_to(target)
    return dest


LINKED = "kubernetes/manifests/20-kueue.yaml"


@pytest.mark.parametrize("target", ["file", "environ"])
def test_plan_diff_does_not_follow_a_link_out_of_the_bundle(dev_bundle, tmp_path, target):
    secret = tmp_path / "secret.yaml"
    secret.write_text(SECRET_YAML)
    out = _linked_copy(dev_bundle, tmp_path / "out", LINKED, secret if target == "file" else Path("/proc/self/environ"))
    env = {"ORCHGEN_SECRET": SECRET}
    for fmt in ("text", "json"):
        proc = run("plan", REPO / "examples" / "research-lab.yaml", "-o", out, "--diff", "--format", fmt, env=env)
        # nothing on stderr but the plan's own warnings (the example's pools name no platform: issue 35)
        assert proc.returncode == 1 and all(ln.startswith("orchgen: warning: ") for ln in proc.stderr.splitlines()), \
            proc.stderr
        assert SECRET not in proc.stdout + proc.stderr, proc.stdout
        if fmt == "json":
            files = {f["path"]: f for f in json.loads(proc.stdout)["files"]}
            assert files[LINKED]["note"] == "is a symbolic link leading outside the bundle: not read"
            assert files[LINKED]["diff"] == ""
        else:
            assert f"not read: {LINKED}: is a symbolic link leading outside the bundle" in proc.stdout, proc.stdout


def test_plan_check_names_a_link_out_of_the_bundle(dev_bundle, tmp_path):
    secret = tmp_path / "secret.yaml"
    secret.write_text(SECRET_YAML)
    out = _linked_copy(dev_bundle, tmp_path / "out", LINKED, secret)
    proc = run("plan", REPO / "examples" / "research-lab.yaml", "-o", out, "--check")
    assert proc.returncode == 1 and SECRET not in proc.stdout, proc.stdout
    assert f"  changed: {LINKED} (is a symbolic link leading outside the bundle: not read)" in proc.stdout.splitlines()


def test_validate_against_does_not_follow_links_out_of_either_bundle(dev_bundle, tmp_path):
    secret = tmp_path / "secret.yaml"
    secret.write_text(SECRET_YAML)
    old = _linked_copy(dev_bundle, tmp_path / "old", LINKED, secret)
    new = _linked_copy(dev_bundle, tmp_path / "new", "kubernetes/manifests/18-topology.yaml", secret)
    proc = run("validate", "--no-fetch", new, "--against", old)
    assert "Traceback" not in proc.stderr and SECRET not in proc.stdout + proc.stderr, proc.stdout
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "kubernetes/manifests/18-topology.yaml:0: is a symbolic link leading outside the bundle: not read " \
           "(a bundle is committed and applied as it is)" in lines, proc.stdout
    assert any(line.startswith("notice: --against: ") and f"{LINKED}:0: is a symbolic link leading outside" in line
               for line in lines), proc.stdout
    assert any(f"not read: {LINKED}: is a symbolic link leading outside the bundle" in line for line in lines)


def test_the_confined_reader_refuses_a_link_swapped_in_and_keeps_links_inside(tmp_path):
    from generator import bundle
    from generator.spec.inputs import Refused

    root = tmp_path / "b"
    (root / "d").mkdir(parents=True)
    (root / "a.yaml").write_text("a: 1\n")
    (root / "d" / "in.yaml").symlink_to("../a.yaml")
    (root / "d" / "up").symlink_to("..")
    (tmp_path / "secret").write_text(SECRET)
    (root / "out.yaml").symlink_to(tmp_path / "secret")
    assert bundle.read_inside(root, "d/in.yaml") == b"a: 1\n"
    assert bundle.read_inside(root, "d/up/a.yaml") == b"a: 1\n"
    for rel in ("out.yaml", "../secret", "d/up/../../secret"):
        with pytest.raises(bundle.LinkOutside):
            bundle.read_inside(root, rel)
    (root / "fifo").unlink(missing_ok=True)
    os.mkfifo(root / "fifo")
    with pytest.raises(Refused, match="FIFO"):
        bundle.read_inside(root, "fifo")


def test_force_does_not_replace_a_directory_elsewhere_through_a_link(tmp_path):
    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir()
    (real / "precious.txt").write_text("keep me")
    link.symlink_to(real)
    # refused as every folder orchgen did not write is, --force or not (issue 39), through a link too
    refused(run("plan", REPO / "examples" / "dev-ci.yaml", "-o", link, "--force"),
            rf"^orchgen: {re.escape(str(link))}: is not empty and was not written by orchgen")
    assert sorted(p.name for p in real.iterdir()) == ["precious.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]


def test_init_and_import_do_not_write_through_a_dangling_link(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "workload.yaml"
    link.symlink_to(elsewhere / "planted.yaml")
    for args in (("init", "-o", link), ("init", "-o", link, "--force"),
                 ("import", "slurm", REPO / "tests/data/sites/acct-lab/slurm.conf", "-o", link, "--force")):
        refused(run(*args, timeout=120), rf"^orchgen: {re.escape(str(link))}: is a symbolic link; orchgen does not "
                                         r"write through one")
        assert not any(elsewhere.iterdir()) and link.is_symlink()


# ---------------------------------------------------------------- terminal escapes from file content


def test_check_and_diff_escape_control_characters(dev_bundle, tmp_path):
    import shutil

    out = tmp_path / "out"
    shutil.copytree(dev_bundle, out)
    (out / "README.md").write_text((out / "README.md").read_text() + "\x1b]0;pwned\x07\x1b[2J\tkept tab\r\n")
    (out / "kubernetes" / "x\x1b[31m.yaml").write_text("a: 1\n")
    check = run("plan", REPO / "examples" / "research-lab.yaml", "-o", out, "--check")
    diff = run("plan", REPO / "examples" / "research-lab.yaml", "-o", out, "--diff")
    for proc in (check, diff):
        assert proc.returncode == 1, proc.stderr
        assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout and "\r" not in proc.stdout, proc.stdout
        assert "x\\x1b[31m.yaml" in proc.stdout
    assert "-\\x1b]0;pwned\\x07\\x1b[2J\tkept tab\\r" in diff.stdout.splitlines(), diff.stdout
    assert_printable(check.stdout.replace("\n", ""))


def test_plan_diff_renders_charts_only_from_inside_the_charts_folder(tmp_path):
    """`plan --diff --charts DIR` renders <DIR>/<chart>/<version>: a bundle's `../..` picks nothing outside."""
    from generator.impact.kube import _chart_dir

    charts = tmp_path / "charts"
    assert _chart_dir(charts, {"chart": "kueue", "version": "0.19.2"}) == charts / "kueue" / "0.19.2"
    for chart, version in (("..", "x"), ("kueue", ".."), ("../../etc", "1.0.0"), ("kueue", "0.19.2/../../x"),
                           ("", "1.0.0"), (None, "1.0.0")):
        assert _chart_dir(charts, {"chart": chart, "version": version}) is None


def test_a_huge_repository_in_a_bundle_is_cut_in_the_refusal(tmp_path, repo):
    """A bundle's repository is echoed cut, as every value from input is (issue 40: a 10 MB value echoed whole)."""
    name, version, _ = KUEUE
    huge = "https://" + "a" * 100_000 + ".example.invalid/charts"
    bundle = small_bundle(tmp_path / "b", name, version, huge)
    line = refused(run("validate", bundle, env=cache_env(tmp_path)), r"^orchgen: ")
    assert len(line) < 2_100 and line.endswith("more)"), len(line)  # the CLI's 2,000-character cap
    assert repo.connections == 0


def test_an_archive_of_too_many_files_is_refused(tmp_path, monkeypatch):
    """The member cap (MAX_FILES) of an archive: counted while unpacking, nothing left in the cache."""
    from generator.validate import charts

    name, version, home = KUEUE
    many = [(_member(f"{name}/templates/t{i}.yaml", size=2), b"x\n") for i in range(8)]
    monkeypatch.setattr(charts, "MAX_FILES", 5)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    target = charts.blob_dir("0" * 64)
    with pytest.raises(charts.FetchError, match="the archive holds more than 5 files"):
        charts._unpack(chart_archive(name, version, many), charts.Pin(home, name, version), target)
    assert not target.exists() and not any(p.is_file() for p in (tmp_path / "cache").rglob("*"))
    monkeypatch.setattr(charts, "MAX_FILES", 20)
    charts._unpack(chart_archive(name, version, many), charts.Pin(home, name, version), target)
    assert (target / "Chart.yaml").is_file() and len(list((target / "templates").iterdir())) == 8


@pytest.mark.parametrize("target", ["/dev/zero", "secret"])
def test_an_old_bundles_plan_json_is_not_read_through_a_link(dev_bundle, tmp_path, target):
    """A bundle written before the manifest (its marker lists no files) is told by its plan.json's fleet name:
    that plan.json, a link to /dev/zero, was read whole (past 20 GB, then killed); a link out of the bundle
    was read as the fleet's. Neither is read now: the fleet is unknown, and --force is asked for."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(dev_bundle, out)
    (out / ".orchgen-bundle").write_bytes((out / ".orchgen-bundle").read_bytes().split(b"\n")[0] + b"\n")
    (tmp_path / "secret").write_text('{"name": "research-lab"}\n')
    (out / "plan.json").unlink()
    (out / "plan.json").symlink_to(target if target.startswith("/") else tmp_path / target)
    import resource

    def capped() -> None:  # a regression reads /dev/zero until memory runs out: 4 GiB here, not the machine's
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    proc = run_cli(("plan", REPO / "examples" / "research-lab.yaml", "-o", out, "-q"), capture_output=True,
                   text=True, cwd=REPO, timeout=60, preexec_fn=capped)
    lines = [ln for ln in proc.stderr.splitlines() if not ln.startswith("orchgen: warning: ")]  # the example's own
    assert proc.returncode == 2 and len(lines) == 1, (proc.returncode, proc.stderr)
    assert lines[0].startswith(f"orchgen: {out}: holds the bundle of fleet (unknown), not research-lab; pass --force")
    assert (out / "plan.json").is_symlink()
