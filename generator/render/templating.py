"""Jinja2 for the line-oriented files (slurm.conf, gres.conf, topology.conf, README.md ...).

Owns the one template environment over `templates/` (shipped as generator.templates). Imports
nothing of orchgen: a renderer passes every fact a template reads in its context.
"""
from __future__ import annotations

from functools import cache
from importlib import resources

import jinja2


@cache
def templates() -> jinja2.Environment:
    root = resources.files("generator.templates")
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        undefined=jinja2.StrictUndefined,  # a missing fact is a bug, not an empty string
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def render_template(name: str, **context: object) -> bytes:
    return templates().get_template(name).render(**context).encode()
