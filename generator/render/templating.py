"""Jinja2 for the line-oriented files (slurm.conf, gres.conf, topology.conf, README.md ...).

Owns the one template environment over `templates/` (shipped as generator.templates). Imports
nothing of orchgen: a renderer passes every fact a template reads in its context.
"""
from __future__ import annotations

import os
from functools import cache
from importlib import resources
from pathlib import Path

import jinja2


class _Bytecode(jinja2.FileSystemBytecodeCache):
    """Compiled templates kept between runs (Jinja2's cache: keyed by template name and a digest of its
    source, and by the Python and Jinja2 versions): compiling the templates was a third of a `plan`.
    A cache that cannot be read or written is only slower, never an error."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except (OSError, EOFError, ValueError, TypeError):
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _bytecode_cache() -> _Bytecode | None:
    try:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    except (RuntimeError, KeyError):  # no home folder to be found: no cache
        return None
    return _Bytecode(str(Path(base) / "orchgen" / "templates"))


@cache
def templates() -> jinja2.Environment:
    root = resources.files("generator.templates")
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        bytecode_cache=_bytecode_cache(),
        undefined=jinja2.StrictUndefined,  # a missing fact is a bug, not an empty string
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def render_template(name: str, **context: object) -> bytes:
    return templates().get_template(name).render(**context).encode()
