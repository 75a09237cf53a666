"""What orchgen reads because a workload.yaml says so, and the values it must not take on trust.

orchgen runs in CI on workload.yaml files strangers propose, so the loader treats the file as
hostile (issue 19):

* `confine`: a file that workload.yaml names (`fleet.fabric.from` today; any later feature that
  reads a file calls this too) resolves inside the folder of workload.yaml, symbolic links
  followed; anything else is refused naming the field. `orchgen plan --input-root DIR` allows
  another folder explicitly.
* `read_bounded`: only a regular file is read (a FIFO, a device such as /dev/zero, a directory are
  refused before a byte is read), and only up to a size limit checked before reading.
* `fleet_problems` / `version_warnings`: versions that land in the bundle (chart versions go into
  releases.yaml, the README table and shell lines; slurm_version and kubernetes_version pick what the
  renderers write) are checked against what orchgen supports.

Nothing here quotes the content of a file it refuses: messages say what was expected and where.
"""
from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from typing import TYPE_CHECKING

from .. import catalog

if TYPE_CHECKING:  # pydantic's models cost ~0.1 s to import: `validate` reads bundles with Refused alone
    from .models import Fleet, Path_

MAX_INPUT_BYTES = 16 * 1024 * 1024  # workload.yaml and every file it names; checked before reading
MAX_INT_DIGITS = 64  # no count in workload.yaml comes near; Python refuses int("9" * 4301) anyway


class Refused(Exception):
    """A file or value refused; the message names no content, the caller adds file/line/field."""


def read_bounded(path: str | os.PathLike[str], limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them. A FIFO would block for
    ever, /dev/zero never ends, a directory is no file: each is refused before anything is read.
    OSError (no such file, no permission, a name too long) is left to the caller, which names the path."""
    st = os.stat(path)  # stat follows links and never blocks, unlike open() on a FIFO
    if not stat.S_ISREG(st.st_mode):
        raise Refused(f"is {_kind(st.st_mode)}, not a regular file")
    if st.st_size > limit:
        raise Refused(f"is larger than {limit // 2**20} MiB")
    # O_NONBLOCK: should the path become a FIFO between stat and open, open returns at once
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(f"is {_kind(st.st_mode)}, not a regular file")
        chunks, size = [], 0
        while size <= limit:  # the file may grow while it is read: stop one byte past the limit
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise Refused(f"is larger than {limit // 2**20} MiB")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def confine(base: str | os.PathLike[str], rel: str, roots: Sequence[str | os.PathLike[str]] = ()) -> Path:
    """The path of `rel`, a file named in workload.yaml, relative to `base` (the folder of
    workload.yaml): it must resolve, symbolic links followed, inside `base` or one of `roots` (the
    folders the user allowed with --input-root). Raises Refused otherwise; the message does not
    quote where it led."""
    if "\0" in rel:
        raise Refused("holds a NUL character: not a file name")
    if os.path.isabs(rel):
        raise Refused("must be a path relative to the folder of workload.yaml, not an absolute path"
                      + _roots_hint(roots))
    path = Path(base) / rel
    real = os.path.realpath(path)
    allowed = [os.path.realpath(base), *(os.path.realpath(r) for r in roots)]
    if not any(real == top or real.startswith(top.rstrip(os.sep) + os.sep) for top in allowed):
        raise Refused("must name a file inside the folder of workload.yaml (after `..` and symbolic "
                      "links are followed, it leads outside)" + _roots_hint(roots))
    return Path(real)


def _roots_hint(roots: Sequence[str | os.PathLike[str]]) -> str:
    return " or a folder given with --input-root" if roots else \
        "; orchgen plan --input-root DIR allows another folder"


# ---------------------------------------------------------------- versions

# The Slurm releases orchgen writes configuration for. Oldest: 22.05, Debian 12's Slurm, the oldest
# the test suite runs a real slurmctld on (`select/cons_tres` and `gres/gpu` as written need 19.05+;
# `slurm_version: "2.6"` would get a configuration its Slurm cannot read). Newest: 26.05, the newest
# the test suite builds and runs (../shared/notes, the 26.05 chroot). Newer plans with a warning.
SLURM_OLDEST, SLURM_NEWEST = (22, 5), (26, 5)
# Kubernetes minors: the oldest the test suite plans and checks bundles for (1.29; the
# kubernetes-validate schemas `orchgen validate` uses start at 1.25), the newest with schemas
# bundled by the kubernetes-validate release the project pins (1.37.0 bundles 1.25-1.37).
KUBERNETES_OLDEST, KUBERNETES_NEWEST = (1, 29), (1, 37)

# A chart version as Helm takes it: SemVer 2 (Helm requires SemVer for chart versions), with the
# leading `v` some charts tag with, MAJOR.MINOR allowed (Helm reads "1.10" as 1.10.0). Nothing a
# shell, YAML or a Markdown table would read as syntax: no spaces, quotes, `;`, `|`, `$`, newlines.
_CHART_VERSION = re.compile(r"^v?(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})(\.(0|[1-9][0-9]{0,8}))?"
                            r"(-[0-9A-Za-z.-]{1,64})?(\+[0-9A-Za-z.-]{1,64})?$")
CHART_VERSION = _CHART_VERSION  # also what `orchgen validate` fetches (validate/charts.py)


def _tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def _show(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]:02d}" if version[0] > 1 else f"{version[0]}.{version[1]}"


def fleet_problems(fleet: Fleet) -> Iterator[tuple[str, Path_]]:
    """Refusals: a version below the oldest orchgen supports, a chart version that is not one."""
    opts = fleet.options
    for key, asked, oldest, newest, what in _planes(fleet):
        if _tuple(asked)[:2] < oldest:
            yield (f"{what} {asked} is older than the oldest orchgen writes configuration for "
                   f"({_show(oldest)}; supported: {_show(oldest)} to {_show(newest)})", ("options", key))
    for component, version in sorted(opts.versions.items()):
        if not isinstance(version, str) or not _CHART_VERSION.fullmatch(version):
            from .models import _short

            yield (f"{_short(version)} is not a chart version: write a SemVer version such as 1.2.3 or "
                   "v1.2.3 (no spaces, quotes, newlines or shell characters)", ("options", "versions", component))


def version_warnings(fleet: Fleet) -> list[tuple[str, str]]:
    """(message, field) of each version orchgen plans but cannot vouch for: a Slurm or Kubernetes
    release newer than the newest it knows, a chart version the catalog does not know."""
    out = []
    for key, asked, oldest, newest, what in _planes(fleet):
        if _tuple(asked)[:2] > newest:
            out.append((f"{what} {asked} is newer than the newest orchgen knows ({_show(newest)}): the "
                        "configuration is written as for that release; check its release notes",
                        f"options.{key}"))
    for component, version in sorted(fleet.options.versions.items()):
        known = catalog.known_versions(component)
        if known and version not in known:
            out.append((f"{version} is not a {component} chart release orchgen knows (pinned: "
                        f"{', '.join(sorted(known))}); check that the chart repository has it",
                        f"options.versions.{component}"))
    return out


def _planes(fleet: Fleet) -> Iterator[tuple[str, str, tuple[int, int], tuple[int, int], str]]:
    opts = fleet.options
    yield "slurm_version", opts.slurm_version, SLURM_OLDEST, SLURM_NEWEST, "Slurm"
    yield "kubernetes_version", opts.kubernetes_version, KUBERNETES_OLDEST, KUBERNETES_NEWEST, "Kubernetes"
