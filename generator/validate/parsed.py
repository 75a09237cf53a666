"""YAML that `validate` reads again and again (CRDs, charts' default values), parsed once per content.

Parsing the reference CRDs' schemas and the charts' values.yaml was most of a `validate` with `--crds`
and `--chart-defaults` (cProfile: ~50% of it in PyYAML's constructor). The data of a document is kept
as JSON under $XDG_CACHE_HOME/orchgen/parsed/ (default ~/.cache), named by the SHA-256 of the text and
of this format's version: the same text gives the same data without parsing it again, and a changed
text is a different file. Data JSON cannot hold exactly (non-string keys, timestamps, NaN) is not kept.
A cache that cannot be read or written is only slower, never an error; a file that does not decode
is parsed again.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import yaml

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ~10x faster on big documents
_FORMAT = "orchgen-parsed-1"  # part of every digest: a change of how data is kept makes new names


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "orchgen" / "parsed"


def _cached(digest: "hashlib._Hash", compute: Callable[[], Any]) -> Any:
    """The JSON kept under `digest` in the cache, or compute()'s value, then kept there (no cache without a home)."""
    try:
        path: Path | None = cache_dir() / f"{digest.hexdigest()}.json"
        return json.loads(path.read_bytes())  # type: ignore[union-attr]
    except (RuntimeError, KeyError):  # no home folder to be found: no cache
        path = None
    except (OSError, ValueError, RecursionError):
        pass
    data = compute()
    if path is not None:
        _keep(path, data)
    return data


def load_yaml(text: str, derive: Callable[[str], str] | None = None, kind: str = "") -> Any:
    """yaml.load(text) with the safe loader, from the cache when this text was parsed before. With
    `derive`, the data of derive(text) instead (`kind` names the derivation, which is part of the digest).
    A parse error is raised as yaml.YAMLError, as from yaml.load."""
    head = f"{_FORMAT}\0{yaml.__version__}\0{kind}\0".encode()
    digest = hashlib.sha256(head + text.encode("utf-8", "surrogatepass"))
    return _cached(digest, lambda: yaml.load(derive(text) if derive else text, Loader=_Loader))


def derived(text: str, kind: str, compute: Callable[[], Any]) -> Any:
    """compute(), a function of `text` alone that `kind` names (with a digest of the code that computes
    it: kind is part of the digest), from the cache when it was computed for this text before."""
    digest = hashlib.sha256(f"{_FORMAT}\0derived\0{kind}\0".encode() + text.encode("utf-8", "surrogatepass"))
    return _cached(digest, compute)


@functools.lru_cache(maxsize=None)
def code_digest(module_file: str) -> str:
    """The SHA-256 of a module's source, for a `derived` kind: changed code, new names."""
    try:
        return hashlib.sha256(Path(module_file).read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


def _keep(path: Path, data: Any) -> None:
    try:
        blob = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        if json.loads(blob) != data:  # a non-string key would come back a string
            return
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob.encode("utf-8", "surrogatepass"))
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except (TypeError, ValueError, OSError, RecursionError):
        pass
