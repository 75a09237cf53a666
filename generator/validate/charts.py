"""The CRDs and default values of the charts a bundle pins, fetched once into a user cache.

`orchgen validate` without `--crds` / `--chart-defaults` reads `kubernetes/helm/releases.yaml` and
pulls each release's chart at its pinned version, as `helm pull --repo URL CHART --version V` does
for an https Helm repository (index.yaml, then the archive it lists, its sha256 digest checked) and
`helm pull oci://REGISTRY/PATH/CHART --version V` for an OCI registry (the distribution API: the
manifest of tag V, `+` written `_` as Helm pushes it, then its Helm chart layer, anonymous bearer
token where the registry asks for one).

A bundle is input nobody reviewed (issue 40), so before anything is built from a release: its chart
name must be Helm's grammar and its version SemVer (no path), and its repository the one orchgen's
catalog pins for that chart, or one the user passed with `--allow-repo`. Every request is https
(redirects too), has connect and read timeouts, a total deadline per chart ($ORCHGEN_FETCH_DEADLINE_S)
and a size cap (index.yaml, archive, OCI manifest and blob). The archive is checked against its
digest (index.yaml's sha256, the OCI layer's), unpacked with no absolute path, no `..`, no link,
device or FIFO, at most MAX_FILES members and MAX_UNPACKED bytes, into the cache under its own
sha256: `$XDG_CACHE_HOME/orchgen/charts/blobs/sha256/<digest>/` (default ~/.cache), with
`refs/<repository>/<chart>/<version>` naming the digest; every cache path is resolved and confined
under the cache root. Later runs and `--offline` read only the cache.

`ORCHGEN_CHART_MIRROR` replaces every release's repository with one (an https:// or http:// Helm
repository, or oci://host/path, plain HTTP on loopback): a site's mirror of the upstream
repositories, and the tests' local repository on loopback; the user's setting is the only way to
plain http. The cache is keyed by the repository the bundle pins, not the mirror.

CRDs are the chart's `crds/` files and its templates that define a CustomResourceDefinition (Kueue
and Slinky keep theirs in templates); Go template actions in those are blanked before parsing: the
schema, which is all validate reads, has none.
"""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import http.client
import io
import json
import os
import re
import shutil
import signal
import socket
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml

from ..errors import OrchgenError, cut
from .pins import pin_problem

MIRROR_ENV = "ORCHGEN_CHART_MIRROR"
DEADLINE_ENV = "ORCHGEN_FETCH_DEADLINE_S"  # the whole of one chart's fetch, index to archive
DEADLINE_S = 120.0
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 30.0  # no byte for this long: the server is gone
MAX_INDEX = 64 << 20  # a big repository's index.yaml (every version of every chart) is tens of MB
MAX_ARCHIVE = 64 << 20  # the biggest pinned chart (kube-prometheus-stack) packs to a few MB
MAX_MANIFEST = 4 << 20  # an OCI manifest or token reply: a few KB
MAX_UNPACKED = 256 << 20  # the archive's content, unpacked (kube-prometheus-stack: ~15 MB)
MAX_FILES = 20_000  # members of one chart archive (kube-prometheus-stack: ~600)
HELM_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
CRD_DIR = ".orchgen-crds"  # in each cached chart: its CRDs as plain YAML

_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Pin:
    repo: str
    chart: str
    version: str

    def __str__(self) -> str:
        return f"{self.chart} {self.version}"


def repo_problem(repo: object) -> str | None:
    """Why a release's or --allow-repo's repository URL is refused (None: an https:// or oci:// URL)."""
    if not isinstance(repo, str) or not repo.startswith(("https://", "oci://")):
        return "not an https:// Helm repository or an oci:// registry"
    parts = urllib.parse.urlsplit(repo)
    if not parts.hostname or parts.username or parts.password or parts.query or parts.fragment \
            or not repo.isprintable() or any(c.isspace() for c in repo):
        return "not a plain repository URL (a host, a path; no credentials, query or fragment)"
    return None


def _norm(repo: str) -> str:
    return repo.rstrip("/")


def catalog_repos(chart: str) -> set[str]:
    """The repositories orchgen's catalog pins for a chart name (and KAI's home before its move)."""
    from .. import catalog

    out = {_norm(c.repo) for c in catalog.CATALOG.values() if c.chart == chart}
    if _norm(catalog.KAI_HOME) in out:
        out.add(_norm(catalog.KAI_OLD_HOME[1]))
    return out


def repo_allowed(pin: Pin, allowed: tuple[str, ...] = ()) -> bool:
    return _norm(pin.repo) in catalog_repos(pin.chart) | {_norm(a) for a in allowed}


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "orchgen" / "charts"


def _confined(*parts: str) -> Path:
    """cache_root()/parts..., resolved and refused unless it stays under the cache root."""
    root = Path(os.path.realpath(cache_root()))
    path = Path(os.path.realpath(root.joinpath(*parts)))
    if path == root or root not in path.parents:
        raise FetchError(f"{'/'.join(parts)}: leads outside the chart cache")
    return path


def ref_path(pin: Pin) -> Path:
    """Where the cache records which archive (its sha256) a repository's chart version is."""
    problem = pin_problem(pin.chart, pin.version)
    if problem:
        raise FetchError(f"{pin.chart!r} {pin.version!r}: {problem[0]}: {problem[1]}")
    repo = re.sub(r"[^A-Za-z0-9.-]+", "_", re.sub(r"^[a-z]+://", "", _norm(pin.repo)))[:80].strip(".") or "_"
    return _confined("refs", repo, pin.chart, pin.version)


def blob_dir(digest: str) -> Path:
    """The unpacked chart of the archive whose sha256 is `digest` (content-addressed)."""
    if not _HEX.fullmatch(digest):
        raise FetchError("not a sha256 digest")
    return _confined("blobs", "sha256", digest)


def cache_dir(pin: Pin) -> Path | None:
    """The cached, unpacked chart of `pin` (None: not cached, or the cache entry is not whole)."""
    try:
        ref = ref_path(pin)
        digest = ref.read_text(encoding="ascii").strip() if ref.is_file() and not ref.is_symlink() else ""
        target = blob_dir(digest) if digest else None
    except (FetchError, OSError, UnicodeDecodeError):
        return None
    if target is None or not (target / "Chart.yaml").is_file() or (target / "Chart.yaml").is_symlink():
        return None
    return target


def pins(releases: list[dict]) -> list[Pin]:
    out = []
    for rel in releases:
        repo, chart, version = (rel.get(k) for k in ("repo", "chart", "version"))
        if all(isinstance(v, str) and v for v in (repo, chart, version)):
            pin = Pin(repo, chart, version)
            if pin not in out:
                out.append(pin)
    return out


class FetchError(Exception):
    pass


def ensure(pin: Pin, offline: bool, allowed: tuple[str, ...] = ()) -> Path | None:
    """The unpacked chart in the cache, fetched first unless `offline` (None: not cached)."""
    problem = pin_problem(pin.chart, pin.version)
    if problem:  # before any path or URL is built from them
        raise FetchError(f"{problem[0]}: {problem[1]}")
    target = cache_dir(pin)
    if target is not None:
        return target
    if offline:
        return None
    if not repo_allowed(pin, allowed):
        raise FetchError(f"{pin.repo} is not the repository orchgen's catalog pins for {pin.chart}")
    mirror = os.environ.get(MIRROR_ENV)
    repo = mirror or pin.repo
    with _Deadline(_deadline_s()) as deadline:
        fetch = _Fetch(deadline, plain_http=bool(mirror))
        archive = fetch.oci(repo, pin) if repo.startswith("oci://") else fetch.helm(repo, pin)
    digest = hashlib.sha256(archive).hexdigest()
    target = blob_dir(digest)
    if not (target / "Chart.yaml").is_file():
        _unpack(archive, pin, target)
    ref = ref_path(pin)
    ref.parent.mkdir(parents=True, exist_ok=True)
    tmp = ref.with_name(f".{ref.name}.{os.getpid()}.tmp")
    tmp.write_text(digest + "\n", encoding="ascii")
    os.replace(tmp, ref)  # the ref names a whole chart or nothing
    return target


def _deadline_s() -> float:
    try:
        value = float(os.environ.get(DEADLINE_ENV) or DEADLINE_S)
    except ValueError:
        return DEADLINE_S
    return value if 0 < value < 3600 else DEADLINE_S


class _Deadline:
    """The whole fetch of one chart must end by a deadline: each read checks it, and in the main thread
    SIGALRM interrupts a read that blocks (a server that trickles its headers one byte at a time)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self._old = None

    def left(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise FetchError(f"took longer than {self.seconds:g} s (set {DEADLINE_ENV} to allow more)")
        return left

    def _alarm(self, *_: object) -> None:
        raise FetchError(f"took longer than {self.seconds:g} s (set {DEADLINE_ENV} to allow more)")

    def __enter__(self) -> _Deadline:
        if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
            self._old = signal.signal(signal.SIGALRM, self._alarm)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *_: object) -> None:
        if self._old is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._old)


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Redirects (a GitHub release asset's CDN) are followed over https only, unless the user's
    mirror is plain http; never to another scheme."""

    def __init__(self, plain_http: bool) -> None:
        self.plain_http = plain_http

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001 (urllib's signature)
        if not newurl.startswith("https://") and not (self.plain_http and newurl.startswith("http://")):
            raise FetchError(f"redirected to {newurl.split('?')[0]}: only https://"
                             + (" and http://" if self.plain_http else ""))
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class _Fetch:
    def __init__(self, deadline: _Deadline, plain_http: bool) -> None:
        self.deadline, self.plain_http = deadline, plain_http
        self.opener = urllib.request.build_opener(_Redirects(plain_http))

    def get(self, url: str, limit: int, headers: dict[str, str] | None = None) -> bytes:
        schemes = ("https://", "http://") if self.plain_http else ("https://",)
        if not url.startswith(schemes):
            raise FetchError(f"{url.split('?')[0]}: only {' and '.join(schemes)} URLs"
                             + ("" if self.plain_http else f" (http:// only through {MIRROR_ENV})"))
        request = urllib.request.Request(url, headers={"User-Agent": "orchgen", **(headers or {})})
        timeout = min(CONNECT_TIMEOUT_S, self.deadline.left())
        with self.opener.open(request, timeout=timeout) as response:  # noqa: S310 (scheme checked)
            length = response.headers.get("Content-Length")
            if length and length.isdigit() and int(length) > limit:
                raise FetchError(f"{url.split('?')[0]}: larger than {_size(limit)}")
            with contextlib.suppress(AttributeError, OSError):  # the read timeout, once connected
                response.fp.raw._sock.settimeout(min(READ_TIMEOUT_S, self.deadline.left()))
            chunks, size = [], 0
            while True:
                self.deadline.left()
                chunk = response.read1(1 << 16)
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:
                    raise FetchError(f"{url.split('?')[0]}: larger than {_size(limit)}")
                chunks.append(chunk)
            return b"".join(chunks)

    def helm(self, repo: str, pin: Pin) -> bytes:
        base = repo.rstrip("/") + "/"
        index = self.get(base + "index.yaml", MAX_INDEX)
        try:
            entries = yaml.load(index, Loader=_Loader)["entries"][pin.chart]
        except (yaml.YAMLError, KeyError, TypeError):
            raise FetchError(f"{base}index.yaml lists no chart {pin.chart}") from None
        entry = next((e for e in entries if isinstance(e, dict) and str(e.get("version")) == pin.version), None) \
            if isinstance(entries, list) else None
        if entry is None or not isinstance(entry.get("urls"), list) or not entry["urls"]:
            raise FetchError(f"{base}index.yaml has no {pin.chart} version {pin.version}")
        data = self.get(urllib.parse.urljoin(base, str(entry["urls"][0])), MAX_ARCHIVE)
        digest = entry.get("digest")
        if digest and hashlib.sha256(data).hexdigest() != str(digest).removeprefix("sha256:"):
            raise FetchError(f"{pin}: archive's sha256 is not the digest index.yaml gives")
        if not digest and not self.plain_http:
            raise FetchError(f"{base}index.yaml gives no sha256 digest for {pin.chart} {pin.version}")
        return data

    def oci(self, repo: str, pin: Pin) -> bytes:
        host, _, path = repo.removeprefix("oci://").rstrip("/").partition("/")
        name = f"{path}/{pin.chart}" if path else pin.chart
        # a loopback mirror speaks plain HTTP (helm's --plain-http); every other registry HTTPS
        plain = self.plain_http and urllib.parse.urlsplit(f"//{host}").hostname in ("127.0.0.1", "localhost")
        base = f"{'http' if plain else 'https'}://{host}/v2/{name}"
        accept = "application/vnd.oci.image.manifest.v1+json"
        token: dict[str, str] = {}

        def get(url: str, headers: dict[str, str], limit: int) -> bytes:
            try:
                return self.get(url, limit, {**headers, **token})
            except urllib.error.HTTPError as exc:
                challenge = exc.headers.get("WWW-Authenticate", "") if exc.code == 401 else ""
                if not challenge.lower().startswith("bearer") or token:
                    raise
                params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
                query = urllib.parse.urlencode({k: v for k, v in params.items() if k in ("service", "scope")})
                try:
                    reply = json.loads(self.get(f"{params.get('realm', '')}?{query}", MAX_MANIFEST))
                    token["Authorization"] = f"Bearer {reply.get('token') or reply.get('access_token')}"
                except (ValueError, AttributeError):
                    raise FetchError(f"{host}: its token service gave no token") from None
                return self.get(url, limit, {**headers, **token})

        try:
            manifest = json.loads(get(f"{base}/manifests/{pin.version.replace('+', '_')}", {"Accept": accept},
                                      MAX_MANIFEST))
            layers = manifest.get("layers", [])
            layer = next((lay for lay in layers if isinstance(lay, dict) and lay.get("mediaType") == HELM_LAYER),
                         None)
        except (ValueError, AttributeError, TypeError):
            raise FetchError(f"{repo}/{pin.chart}:{pin.version}: the manifest is not OCI JSON") from None
        if layer is None:
            raise FetchError(f"{repo}/{pin.chart}:{pin.version} is not a Helm chart (no {HELM_LAYER} layer)")
        algo, _, want = str(layer.get("digest")).partition(":")
        if algo != "sha256" or not _HEX.fullmatch(want):
            raise FetchError(f"{pin}: the chart layer's digest is not a sha256 digest")
        size = layer.get("size")
        if isinstance(size, int) and size > MAX_ARCHIVE:
            raise FetchError(f"{pin}: the chart layer is larger than {MAX_ARCHIVE >> 20} MiB")
        data = get(f"{base}/blobs/sha256:{want}", {}, MAX_ARCHIVE)
        if hashlib.sha256(data).hexdigest() != want:
            raise FetchError(f"{pin}: layer's sha256 is not its digest")
        return data


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Capped(io.RawIOBase):
    """The decompressed archive, read at most `limit` bytes far: a small gzip that expands past the
    cap (or a tar header claiming a huge pax record) stops there instead of filling memory or disk."""

    def __init__(self, stream, limit: int) -> None:  # noqa: ANN001
        self.stream, self.limit, self.seen = stream, limit, 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        data = self.stream.read(n if n >= 0 else 1 << 20)
        self.seen += len(data)
        if self.seen > self.limit:
            raise FetchError(f"unpacks to more than {self.limit >> 20} MiB")
        return data


def _unpack(archive: bytes, pin: Pin, target: Path) -> None:
    """Unpack the chart archive into `target` (a fresh cache directory), refusing what a chart never
    holds: absolute paths, `..`, links, devices, FIFOs, more than MAX_FILES members or MAX_UNPACKED bytes."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    try:
        stream = _Capped(gzip.GzipFile(fileobj=io.BytesIO(archive)), MAX_UNPACKED + (MAX_FILES + 2) * 1024)
        count, total, top = 0, 0, None
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                count += 1
                total += max(member.size, 0)
                if count > MAX_FILES:
                    raise FetchError(f"{pin}: the archive holds more than {MAX_FILES} files")
                if total > MAX_UNPACKED:
                    raise FetchError(f"{pin}: the archive unpacks to more than {MAX_UNPACKED >> 20} MiB")
                parts = PurePosixPath(member.name).parts
                if member.name.startswith(("/", "\\")) or ".." in parts or "\\" in member.name or not parts:
                    raise FetchError(f"{pin}: the archive names a path outside its chart")
                if not (member.isfile() or member.isdir()):
                    raise FetchError(f"{pin}: the archive holds a link, device or FIFO ({_shown(member.name)})")
                if top is None:
                    top = parts[0]
                elif parts[0] != top:
                    raise FetchError(f"{pin}: the archive holds more than one top directory")
                tar.extract(member, staging, set_attrs=False, **_DATA)
        chart = staging / (top or "")
        if not top or not (chart / "Chart.yaml").is_file():
            raise FetchError(f"{pin}: the archive holds no chart directory")
        meta = yaml.load((chart / "Chart.yaml").read_text(encoding="utf-8"), Loader=_Loader) or {}
        if not isinstance(meta, dict) or str(meta.get("name")) != pin.chart \
                or str(meta.get("version")).lstrip("v") != pin.version.lstrip("v"):
            shown = (meta.get("name"), meta.get("version")) if isinstance(meta, dict) else ("?", "?")
            raise FetchError(f"{pin}: the archive holds {_shown(str(shown[0]))} {_shown(str(shown[1]))}")
        _extract_crds(chart)
        try:
            os.rename(chart, target)  # whole or not at all: a second run sees a complete chart or none
        except OSError:
            if not (target / "Chart.yaml").is_file():  # else: another run unpacked the same archive
                raise
    except (tarfile.TarError, OSError, EOFError, zlib.error, gzip.BadGzipFile, yaml.YAMLError,
            UnicodeDecodeError) as exc:
        raise FetchError(f"{pin}: cannot unpack the archive: {type(exc).__name__}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


_DATA = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # Python 3.11.4+: modes made safe too


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"


def _shown(text: str) -> str:
    return text[:80].encode("unicode_escape").decode("ascii")


_COMMENT = re.compile(r"\{\{-?\s*/\*.*?\*/\s*-?\}\}", re.S)
_ACTION_LINE = re.compile(r"^\s*\{\{.*\}\}\s*$", re.M)
_ACTION = re.compile(r"\{\{.*?\}\}")


def _extract_crds(chart: Path) -> None:
    """The chart's (and its subcharts') CRDs as plain YAML under CRD_DIR."""
    out = chart / CRD_DIR
    out.mkdir()
    n = 0
    for path in sorted(chart.rglob("*")):
        if path.suffix not in (".yaml", ".yml") or not path.is_file() or CRD_DIR in path.parts:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if "CustomResourceDefinition" not in text:
            continue
        text = _ACTION.sub("x", _ACTION_LINE.sub("", _COMMENT.sub("", text)))
        try:
            docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)
                    and d.get("kind") == "CustomResourceDefinition"]
        except yaml.YAMLError:
            continue  # a template that builds CRDs from logic: not a schema to read
        for doc in docs:
            n += 1
            (out / f"{n:03d}-{path.stem}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def resolve(releases: list[dict], offline: bool, allowed: tuple[str, ...] = ()) -> tuple[list[Pin], dict[Pin, Path]]:
    """Each pinned chart's cached directory; `offline` with charts missing is one error line, a
    fetch that fails is an error naming the chart, the repository and what to do. `allowed`: the
    user's --allow-repo repositories, besides the one the catalog pins for each chart."""
    wanted = pins(releases)
    found: dict[Pin, Path] = {}
    missing = []
    for pin in wanted:
        try:
            path = ensure(pin, offline, allowed)
        except (FetchError, urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", None) or exc
            if isinstance(exc, (TimeoutError, socket.timeout)) or isinstance(reason, (TimeoutError, socket.timeout)):
                reason = "timed out"
            refused = isinstance(exc, FetchError) and not repo_allowed(pin, allowed)
            # the repository and the reason come from a bundle nobody reviewed: cut, as every echoed value is
            where, repo = cut(os.environ.get(MIRROR_ENV) or pin.repo, 200), cut(pin.repo, 200)
            raise OrchgenError(
                f"cannot fetch {pin} from {where}: {cut(str(reason), 300)}; "
                + (f"pass --allow-repo {repo} to fetch from it, or " if refused else "pass ")
                + f"--crds and --chart-defaults, set {MIRROR_ENV} to a reachable mirror, or --no-fetch to skip the "
                "checks that need them", field="validate") from None
        if path is None:
            missing.append(pin)
        else:
            found[pin] = path
    if missing:
        raise OrchgenError(f"not in the chart cache {cache_root()}: {', '.join(map(str, missing))}; run "
                           "`orchgen validate` once without --offline (or pass --crds and --chart-defaults)",
                           field="--offline")
    return wanted, found


def defaults_view(found: dict[Pin, Path], directory: Path) -> Path:
    """A --chart-defaults directory (`<values_reference>/values.yaml` per catalog chart) made of
    links to the cached charts' values.yaml."""
    from .. import catalog

    for pin, path in found.items():
        for entry in catalog.CATALOG.values():
            if entry.chart == pin.chart and (path / "values.yaml").is_file():
                link = directory / entry.values_reference / "values.yaml"
                link.parent.mkdir(parents=True, exist_ok=True)
                if not link.exists():
                    link.symlink_to(path / "values.yaml")
    return directory


def crd_dirs(found: dict[Pin, Path]) -> list[Path]:
    return [path / CRD_DIR for path in found.values() if any((path / CRD_DIR).iterdir())]
