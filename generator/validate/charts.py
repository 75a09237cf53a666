"""The CRDs and default values of the charts a bundle pins, fetched once into a user cache.

`orchgen validate` without `--crds` / `--chart-defaults` reads `kubernetes/helm/releases.yaml` and
pulls each release's chart at its pinned version, as `helm pull --repo URL CHART --version V` does
for an https Helm repository (index.yaml, then the archive it lists, its sha256 digest checked) and
`helm pull oci://REGISTRY/PATH/CHART --version V` for an OCI registry (the distribution API: the
manifest of tag V, `+` written `_` as Helm pushes it, then its Helm chart layer, anonymous bearer
token where the registry asks for one). The unpacked chart is kept under
`$XDG_CACHE_HOME/orchgen/charts/` (default ~/.cache), one directory per repository, chart and
version, so later runs and `--offline` read only the cache.

`ORCHGEN_CHART_MIRROR` replaces every release's repository with one (an https:// or http:// Helm
repository, or oci://host/path): a site's mirror of the upstream repositories, and the tests' local
repository on loopback. The cache is keyed by the repository the bundle pins, not the mirror.

CRDs are the chart's `crds/` files and its templates that define a CustomResourceDefinition (Kueue
and Slinky keep theirs in templates); Go template actions in those are blanked before parsing: the
schema, which is all validate reads, has none.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..errors import OrchgenError

MIRROR_ENV = "ORCHGEN_CHART_MIRROR"
TIMEOUT_S = 30
MAX_ARCHIVE = 64 << 20  # the biggest pinned chart (kube-prometheus-stack) packs to a few MB
HELM_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
CRD_DIR = ".orchgen-crds"  # in each cached chart: its CRDs as plain YAML


@dataclass(frozen=True)
class Pin:
    repo: str
    chart: str
    version: str

    def __str__(self) -> str:
        return f"{self.chart} {self.version}"


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "orchgen" / "charts"


def cache_dir(pin: Pin) -> Path:
    repo = re.sub(r"[^A-Za-z0-9.-]+", "_", re.sub(r"^[a-z]+://", "", pin.repo.rstrip("/")))[:80]
    return cache_root() / repo / pin.chart / pin.version


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


def ensure(pin: Pin, offline: bool) -> Path | None:
    """The unpacked chart in the cache, fetched first unless `offline` (None: not cached)."""
    target = cache_dir(pin)
    if (target / "Chart.yaml").is_file():
        return target
    if offline:
        return None
    repo = os.environ.get(MIRROR_ENV) or pin.repo
    archive = _pull_oci(repo, pin) if repo.startswith("oci://") else _pull_http(repo, pin)
    _unpack(archive, pin, target)
    return target


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[bytes, dict[str, str]]:
    if not url.startswith(("https://", "http://")):
        raise FetchError(f"{url}: only https://, http:// and oci:// repositories")
    request = urllib.request.Request(url, headers={"User-Agent": "orchgen", **(headers or {})})
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310 (scheme checked)
        data = response.read(MAX_ARCHIVE + 1)
        if len(data) > MAX_ARCHIVE:
            raise FetchError(f"{url}: larger than {MAX_ARCHIVE >> 20} MiB")
        return data, {k.lower(): v for k, v in response.headers.items()}


def _pull_http(repo: str, pin: Pin) -> bytes:
    base = repo.rstrip("/") + "/"
    index, _ = _get(base + "index.yaml")
    try:
        entries = yaml.safe_load(index)["entries"][pin.chart]
    except (yaml.YAMLError, KeyError, TypeError):
        raise FetchError(f"{base}index.yaml lists no chart {pin.chart}") from None
    entry = next((e for e in entries if isinstance(e, dict) and str(e.get("version")) == pin.version), None)
    if entry is None or not entry.get("urls"):
        raise FetchError(f"{base}index.yaml has no {pin.chart} version {pin.version}")
    data, _ = _get(urllib.parse.urljoin(base, str(entry["urls"][0])))
    digest = entry.get("digest")
    if digest and hashlib.sha256(data).hexdigest() != digest:
        raise FetchError(f"{pin}: archive's sha256 is not the digest index.yaml gives")
    return data


def _pull_oci(repo: str, pin: Pin) -> bytes:
    host, _, path = repo.removeprefix("oci://").rstrip("/").partition("/")
    name = f"{path}/{pin.chart}" if path else pin.chart
    # loopback registries speak plain HTTP (helm's --plain-http); every other one HTTPS
    scheme = "http" if host.split(":")[0] in ("127.0.0.1", "localhost") else "https"
    base = f"{scheme}://{host}/v2/{name}"
    accept = "application/vnd.oci.image.manifest.v1+json"
    token: dict[str, str] = {}

    def get(url: str, headers: dict[str, str]) -> bytes:
        try:
            return _get(url, {**headers, **token})[0]
        except urllib.error.HTTPError as exc:
            challenge = exc.headers.get("WWW-Authenticate", "") if exc.code == 401 else ""
            if not challenge.lower().startswith("bearer") or token:
                raise
            params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
            query = urllib.parse.urlencode({k: v for k, v in params.items() if k in ("service", "scope")})
            reply = json.loads(_get(f"{params.get('realm', '')}?{query}")[0])
            token["Authorization"] = f"Bearer {reply.get('token') or reply.get('access_token')}"
            return _get(url, {**headers, **token})[0]

    manifest = json.loads(get(f"{base}/manifests/{pin.version.replace('+', '_')}", {"Accept": accept}))
    layer = next((lay for lay in manifest.get("layers", []) if lay.get("mediaType") == HELM_LAYER), None)
    if layer is None:
        raise FetchError(f"{repo}/{pin.chart}:{pin.version} is not a Helm chart (no {HELM_LAYER} layer)")
    data = get(f"{base}/blobs/{layer['digest']}", {})
    algo, _, want = str(layer["digest"]).partition(":")
    if algo != "sha256" or hashlib.sha256(data).hexdigest() != want:
        raise FetchError(f"{pin}: layer's sha256 is not its digest")
    return data


def _unpack(archive: bytes, pin: Pin, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            if hasattr(tarfile, "data_filter"):  # Python 3.11.4+ (and distributions' backports)
                tar.extractall(staging, filter="data")  # no links out, no absolute paths, no devices
            else:
                members = [m for m in tar.getmembers() if (m.isfile() or m.isdir()) and not m.name.startswith("/")
                           and ".." not in Path(m.name).parts]
                tar.extractall(staging, members=members)  # noqa: S202 (regular files and dirs, inside only)
        top = [p for p in staging.iterdir() if (p / "Chart.yaml").is_file()]
        if len(top) != 1:
            raise FetchError(f"{pin}: the archive holds no chart directory")
        meta = yaml.safe_load((top[0] / "Chart.yaml").read_text(encoding="utf-8")) or {}
        if str(meta.get("name")) != pin.chart or str(meta.get("version")).lstrip("v") != pin.version.lstrip("v"):
            raise FetchError(f"{pin}: the archive holds {meta.get('name')} {meta.get('version')}")
        _extract_crds(top[0])
        os.replace(top[0], target)  # whole or not at all: a second run sees a complete chart or none
    except (tarfile.TarError, OSError, yaml.YAMLError) as exc:
        raise FetchError(f"{pin}: cannot unpack the archive: {exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


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


def resolve(releases: list[dict], offline: bool) -> tuple[list[Pin], dict[Pin, Path]]:
    """Each pinned chart's cached directory; `offline` with charts missing is one error line, a
    fetch that fails is an error naming the chart, the repository and what to do."""
    wanted = pins(releases)
    found: dict[Pin, Path] = {}
    missing = []
    for pin in wanted:
        try:
            path = ensure(pin, offline)
        except (FetchError, urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise OrchgenError(
                f"cannot fetch {pin} from {os.environ.get(MIRROR_ENV) or pin.repo}: {reason}; pass --crds and "
                f"--chart-defaults, set {MIRROR_ENV} to a reachable mirror, or --no-fetch to skip the checks that "
                f"need them", field="validate") from None
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
