"""The bundle on disk: atomic, deterministic writes, and --check.

The whole bundle is rendered in memory first ({relative path: bytes}); only then is it written:
into a staging directory beside the target, which is swapped in with one rename (an atomic
exchange where Linux offers it). An interrupted run leaves the previous bundle whole.

orchgen never deletes a file it did not write (issue 39). The marker file is the bundle's manifest:
the fleet and every file orchgen wrote. A target holding anything else (the input file, a `.git`, a
file a user added, a folder orchgen did not write at all) is refused, --force or not, before anything
is written. A re-plan of the same fleet replaces the bundle (stale files of orchgen's go); another
fleet's bundle is replaced only with --force, and its stack files go with it. A symbolic
link is written through (the directory it points to gets the bundle; the link stays). Files and
directories get the modes the user's umask gives, as `cp` or `git checkout` would.
Every file of an existing bundle folder is read through `read_inside` (links resolved and confined to
the folder): --check, --diff, `validate` and `validate --against` never print another file's content.

Operator-owned files (`OPERATOR_OWNED`) live in the bundle but belong to the operator: a Pulumi
stack's config file (`pulumi/Pulumi.<stack>.yaml`; the Slurm bring-up's `bringup/pulumi/Pulumi.<stack>.yaml`)
holds the cluster's kubeconfig context (the hosts' addresses), the stack's secrets and its passphrase
salt, which `pulumi config set` and `pulumi stack init` write there. orchgen renders a seed for the bundle's own stack; `write` uses it only where the bundle
has no such file yet, and carries every operator-owned file of the previous bundle into the new
one byte for byte (other stacks' files included). `diff` (--check) ignores them: they are not
orchgen's to compare.

Concurrent plans into one target are serialized (issue 19): a plan holds an exclusive flock(2) on
`.<name>.orchgen-lock` beside the target while it checks, stages and swaps; a second plan waits up to
LOCK_WAIT_S, then refuses with "another orchgen plan is writing DIR". Holding the lock, a plan removes
the staging directories that killed runs left for THIS target (`.<name>.orchgen-new-XXXXXXXX` exactly,
never another target's), and removes the lock file when it is done.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import fnmatch
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from .errors import OrchgenError
from .signals import Stopped, held

MARKER = ".orchgen-bundle"
MARKER_TEXT = b"This directory is written by `orchgen plan`; edits here are replaced on the next run.\n"
# The marker is also the bundle's manifest (issue 39): after MARKER_TEXT, the fleet's name and every
# file orchgen wrote, sorted, one a line. A re-plan removes only these (and the operator-owned files
# when the fleet changes); anything else in the directory makes it refuse, --force or not.
_FLEET = "fleet: "
_FILES = "files:"
_SHOWN = 3  # the files a refusal names before "and N more"

Files = dict[str, bytes]

# Bundle paths (fnmatch patterns, `/`-separated) whose files the operator owns once they exist.
OPERATOR_OWNED = ("pulumi/Pulumi.*.yaml",
                  "clusters/*/pulumi/Pulumi.*.yaml",  # a plane beyond one cluster: each cluster's stack
                  # the Slurm bring-up's stack (bringup/pulumi/): its hosts' addresses, the encrypted SSH key and
                  # the passphrase salt; without it here a re-plan refused the bundle the documented
                  # `pulumi stack init` had written into (issue 33, the first real `pulumi up`)
                  "bringup/pulumi/Pulumi.*.yaml")


def operator_owned(path: str) -> bool:
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in OPERATOR_OWNED)


@dataclass(frozen=True)
class Manifest:
    """What a bundle's marker file says: the fleet it was planned for, and the files orchgen wrote."""

    fleet: str | None  # None: a bundle of an orchgen before issue 39 (its marker lists nothing)
    files: tuple[str, ...] | None


def manifest_bytes(files: Files, fleet: str | None) -> bytes:
    """The marker's bytes for a bundle of `files` (deterministic: names only, sorted)."""
    names = sorted({*files, MARKER})
    head = MARKER_TEXT.decode() + f"{_FLEET}{fleet or ''}\n{_FILES}\n"
    return (head + "".join(f"  {name}\n" for name in names)).encode()


def manifest(target: Path) -> Manifest | None:
    """The manifest of the bundle at `target`; None where orchgen did not write it (no marker)."""
    path = Path(target) / MARKER
    if not path.is_file() or path.is_symlink():
        return None
    from .spec.inputs import Refused

    try:  # a regular file, read bounded: a committed bundle may hold anything under this name
        data = read_inside(target, MARKER, _MAX_OWN)
    except (LinkOutside, Refused, OSError):
        return None
    lines = data.decode("utf-8", "replace").splitlines()
    if _FILES not in lines:
        return Manifest(None, None)
    fleet = next((line[len(_FLEET):] for line in lines if line.startswith(_FLEET)), "") or None
    start = lines.index(_FILES) + 1
    return Manifest(fleet, tuple(line[2:] for line in lines[start:] if line.startswith("  ")))


def fleet_of(files: Files) -> str | None:
    """The fleet a rendered bundle is of: plan.json's name."""
    import json

    try:
        return json.loads(files["plan.json"])["name"]
    except (KeyError, ValueError, TypeError):
        return None


def _kept(target: Path) -> Files:
    """The operator-owned files of the bundle at `target` (none unless orchgen wrote it)."""
    if not _is_bundle(target):
        return {}
    out: Files = {}
    for path in listed(target):
        rel = path.relative_to(target).as_posix()
        if not path.is_symlink() and operator_owned(rel):
            data = _read_or_note(target, rel)
            if isinstance(data, str):  # a FIFO or a huge file named like a stack's config: not carried blindly
                raise OrchgenError(f"{rel}: {data}; the operator's file is carried into the new bundle only "
                                   "when it is a regular file", str(target))
            out[rel] = data
    return out


def check_paths(files: Files) -> None:
    """Bundle paths come partly from user data: they must stay inside the bundle."""
    for path in files:
        pure = PurePosixPath(path)
        if pure.is_absolute() or ".." in pure.parts or "\\" in path or str(pure) != path or not path:
            raise OrchgenError(f"refusing unsafe bundle path {path!r}")


def _is_bundle(target: Path) -> bool:
    """orchgen wrote `target`: its marker is a regular file (a link named so proves nothing)."""
    try:
        return stat.S_ISREG(os.lstat(target / MARKER).st_mode)
    except OSError:
        return False


def _fsync_one(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


FSYNC_THREADS = 16  # fsync releases the GIL: the filesystem's journal commits many files' syncs at once


def _side_by_side(fn: Callable[[Any], object], items: list) -> None:
    """fn(item) for every item on up to FSYNC_THREADS threads, the first exception raised again here once all
    are done. Plain threads, not concurrent.futures' pool: importing concurrent.futures (and the logging and
    queue modules it imports) was 1.3% of a 2,048-node `plan`'s instructions (callgrind), paid at every run,
    and nothing here needs futures."""
    errors: list[BaseException] = []
    todo = iter(items)  # shared: a list iterator hands each item to exactly one thread (its next() holds the GIL)

    def work() -> None:
        try:
            for item in todo:
                fn(item)
        except BaseException as exc:  # noqa: BLE001 - raised again in the calling thread below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(min(FSYNC_THREADS, len(items)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def _fsync_tree(root: Path) -> None:
    """Every staged file on disk before the swap, so a crash never leaves the previous bundle swapped out for
    empty files. The syncs run side by side: one after another they took 0.26-0.4 s for an 83-file bundle on
    this project's CI disk, 10x what they take together (ext4 batches concurrent fsyncs into one commit)."""
    paths = [os.path.join(dirpath, name) for dirpath, _, names in os.walk(root) for name in names]
    _side_by_side(_fsync_one, paths)  # an OSError of any one file is raised here


def _unlink_at(job: tuple[int, str]) -> None:
    try:
        os.unlink(job[1], dir_fd=job[0])
    except OSError:  # gone meanwhile, or refused: shutil.rmtree after it says what is left
        pass


def _remove_tree(root: Path) -> None:
    """shutil.rmtree(root) of the previous bundle, its files unlinked side by side first: one after another
    the unlinks of a 2,048-node bundle's 94 just-synced files took 0.2-0.3 s on this project's disk, 4-5x
    what they take together (ext4 again commits them at once). The walk is os.fwalk's (by directory file
    descriptor, never following a link), and rmtree then removes the folders and whatever is left."""
    jobs: list[tuple[int, str]] = []
    fds: list[int] = []
    try:
        for _, _, names, dirfd in os.fwalk(root):
            if names:
                fds.append(os.dup(dirfd))
                jobs.extend((fds[-1], name) for name in names)
        _side_by_side(_unlink_at, jobs)
    finally:
        for fd in fds:
            os.close(fd)
    shutil.rmtree(root)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two directories (Linux renameat2 RENAME_EXCHANGE); False if unsupported."""
    import ctypes  # here, not at the top: only a re-plan needs it

    # dlopen(NULL): the process's own symbols, the C library's among them. ctypes.util.find_library("c")
    # would import ~0.01 s more and run `ldconfig -p` in a subprocess on every re-plan (issue 41).
    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    rc = fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    return rc == 0


def _resolve(target: Path) -> Path:
    """The directory the bundle goes to. A symbolic link is written through: the bundle replaces
    the directory it points to (under the same rules: orchgen's marker, or --force), and the link
    stays. A link to nothing is refused, as are the root and the directory orchgen runs in."""
    if target.is_symlink() and not target.exists():
        raise OrchgenError(f"is a symbolic link to {os.readlink(target)}, which does not exist; "
                           "orchgen writes through a link only to a directory that exists", str(target))
    real = Path(os.path.realpath(target))
    if real == real.parent:
        raise OrchgenError("is the root of the file system; write the bundle to a directory of its own",
                           str(target))
    try:
        here: Path | None = Path(os.path.realpath(os.getcwd()))
    except FileNotFoundError:  # the working directory was deleted: it holds nothing a target could replace
        here = None
    if here is not None and (real == here or real in here.parents):
        raise OrchgenError("is the current directory or holds it; orchgen replaces the bundle directory "
                           "whole, so write it from outside", str(target))
    return real


def _modes(stage: Path) -> None:
    """The modes a user's umask gives (mkdtemp made the stage 0700): the bundle is committed and shared."""
    mask = os.umask(0)
    os.umask(mask)
    for dirpath, dirnames, names in os.walk(stage):
        os.chmod(dirpath, 0o777 & ~mask)
        for name in names:
            path = os.path.join(dirpath, name)
            os.chmod(path, (0o777 if name.endswith((".sh", ".sbatch")) else 0o666) & ~mask)


def write(files: Files, target: Path, force: bool = False, fleet: str | None = None,
          inputs: tuple[str, ...] = ()) -> list[str]:
    """Write the bundle of `fleet` (default: plan.json's name) to `target`; return the paths of the
    previous bundle that are gone (not written again, or another fleet's stack files). `inputs`:
    the files the plan was read from, which `target` must not hold. Whatever the file system refuses
    (no such place, no permission, a read-only or virtual file system) is an OrchgenError naming
    `target`, never a traceback."""
    check_paths(files)
    shown = str(target)
    fleet = fleet if fleet is not None else fleet_of(files)
    try:
        return _write(files, _resolve(Path(target)), force, shown, fleet, inputs)
    except OSError as exc:
        stop = _signal_behind(exc)
        if stop is not None:  # a cleanup cut short by the signal (EBADF from a half-closed walk): the signal says it
            raise stop from None
        name = str(exc.filename or "")
        where = f" ({name})" if name and name != shown and ".orchgen-" not in name else ""
        raise OrchgenError(f"cannot write the bundle: {exc.strerror or exc}{where}", shown) from None


def _signal_behind(exc: BaseException) -> Stopped | None:
    """The trapped signal an error was raised while unwinding from, if any (its __context__ chain)."""
    seen: set[int] = set()
    at: BaseException | None = exc.__context__
    while at is not None and id(at) not in seen:
        if isinstance(at, Stopped):
            return at
        seen.add(id(at))
        at = at.__context__
    return None


def _few(paths: list[str]) -> str:
    more = f" and {len(paths) - _SHOWN} more" if len(paths) > _SHOWN else ""
    return ", ".join(paths[:_SHOWN]) + more


def _raise(exc: OSError) -> None:
    raise exc


def _folders(paths: set[str]) -> set[str]:
    """Every parent folder of `paths` as PurePosixPath(path).parents names them ('.' included): by string
    for a path already in that normal form, PurePosixPath only for another (pathlib was 40% of a re-plan's
    bundle.write CPU, issue 41)."""
    out: set[str] = set()
    for path in paths:
        if not path or "//" in path or "/./" in path or path.startswith(("/", "./")) or path.endswith(("/", "/.")) \
                or path == ".":
            out.update(str(parent) for parent in PurePosixPath(path).parents)
            continue
        out.add(".")
        cut = path.rfind("/")
        while cut > 0 and path[:cut] not in out:
            path = path[:cut]
            out.add(path)
            cut = path.rfind("/")
    return out


def _foreign(target: Path, owned: set[str], bundle: bool) -> list[str]:
    """What in `target` orchgen did not write: files, links and empty folders that are neither in
    `owned` nor (in a `bundle`) operator-owned (a folder as `name/`; a `.git` folder whole, not walked)."""
    folders = _folders(owned)
    out = []
    for dirpath, dirnames, names in os.walk(target, onerror=_raise):
        rel_dir = Path(dirpath).relative_to(target).as_posix()
        prefix = "" if rel_dir == "." else rel_dir + "/"
        for name in list(dirnames):
            full, rel = os.path.join(dirpath, name), prefix + name
            if os.path.islink(full):  # a link to a folder is judged as a file: never followed
                dirnames.remove(name)
                names.append(name)
            elif name == ".git":
                dirnames.remove(name)
                out.append(rel + "/")
            elif rel not in folders and not os.listdir(full):
                out.append(rel + "/")
        out += [prefix + name for name in names if prefix + name not in owned
                and not (bundle and operator_owned(prefix + name))]
    return sorted(out)


def _fleet_on_disk(target: Path) -> str | None:
    """The fleet of a bundle whose marker lists nothing (an orchgen before issue 39): its plan.json's."""
    from .spec.inputs import Refused

    try:  # never through a link out of the bundle, never /dev/zero: a plan.json linked there grew past 20 GB
        return fleet_of({"plan.json": read_inside(target, "plan.json", _MAX_OWN)})
    except (LinkOutside, Refused, OSError):
        return None


def _guard(files: Files, target: Path, force: bool, shown: str, fleet: str | None,
           inputs: tuple[str, ...]) -> tuple[bool, list[str]]:
    """Refuse to replace `target` where that would delete a file orchgen did not write (the input,
    a `.git`, a user's file: --force or not), or another fleet's bundle without --force. Returns
    whether the operator-owned files are carried (the same fleet) and the paths that go."""
    if not target.is_dir() or not any(target.iterdir()):
        return True, []
    for given in inputs:
        real = Path(os.path.realpath(given))
        if real == target or target in real.parents:
            raise OrchgenError(f"holds the input file {real.relative_to(target).as_posix()}; orchgen replaces the "
                               "bundle directory whole and never deletes a file it did not write: write the "
                               "bundle to another folder", shown)
    listed = manifest(target)
    if listed is None:
        owned: set[str] = set()
    elif listed.files is None:  # written before the manifest: what orchgen writes now is all it knows
        owned = {*files, MARKER}
    else:
        owned = set(listed.files)
    foreign = _foreign(target, owned, listed is not None)
    git = next((p for p in foreign if ".git" in p.rstrip("/").split("/")), None)
    if git:
        raise OrchgenError(f"holds a git repository ({git}); orchgen replaces the bundle directory whole and "
                           "never deletes a file it did not write, --force or not: write the bundle to a "
                           "folder of its own (a subfolder of the repository)", shown)
    if foreign:
        what = (f"is not empty and was not written by orchgen (no {MARKER})" if listed is None else
                f"holds {len(foreign)} file(s) not written by orchgen")
        raise OrchgenError(f"{what}: {_few(foreign)}; orchgen replaces the bundle directory whole and never "
                           "deletes a file it did not write, --force or not: move them out, or write the bundle "
                           "to another folder", shown)
    assert listed is not None  # a non-empty folder without the marker holds only foreign files
    old = listed.fleet if listed.files is not None else _fleet_on_disk(target)
    same = old == fleet
    if not same and not force:
        raise OrchgenError(f"holds the bundle of fleet {old or '(unknown)'!s}, not {fleet}; pass --force to "
                           "replace it (its Pulumi stack files go with it)", shown)
    top = os.fspath(target)  # resolved (_resolve): no trailing '/', so a folder below is top + '/' + its path
    on_disk = sorted(n if d == top else f"{d[len(top) + 1:]}/{n}" for d, _, names in os.walk(top) for n in names)
    gone = [p for p in on_disk if p not in files and p != MARKER and not (same and operator_owned(p))]
    gone += [p for p in on_disk if p in files and operator_owned(p) and not same]  # the operator's copy goes
    return same, sorted(gone)


LOCK_WAIT_S = 5.0  # how long a second plan into the same target waits before it refuses
_STAGE_SUFFIX = re.compile(r"[a-z0-9_]{8}")  # tempfile.mkdtemp's random part


@contextlib.contextmanager
def _locked(target: Path, shown: str):
    """An exclusive flock on `.<name>.orchgen-lock` beside `target`, held for the block. The lock file is
    removed by its holder; a plan that locked a file its holder removed meanwhile locks the new one."""
    path = target.parent / f".{target.name}.orchgen-lock"
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() > deadline:
                raise OrchgenError(f"another orchgen plan is writing {shown} (waited {LOCK_WAIT_S:g} s); "
                                   "run again when it has finished") from None
            time.sleep(0.05)
            continue
        try:
            same = os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)  # still holding the lock: no one else can be past this point
        os.close(fd)


def _remove_stale(target: Path) -> None:
    """Staging directories of killed runs into `target` (only its own: `-o 'out*'` names a target
    `out*`, whose staging directories are `.out*.orchgen-new-XXXXXXXX`, not `.out2.orchgen-new-...`).
    Called with the lock held, so no live run owns one."""
    for kind in ("new", "old"):
        prefix = f".{target.name}.orchgen-{kind}-"
        with os.scandir(target.parent) as entries:
            stale = [e.path for e in entries if e.name.startswith(prefix)
                     and _STAGE_SUFFIX.fullmatch(e.name[len(prefix):]) and e.is_dir(follow_symlinks=False)]
        for path in stale:
            shutil.rmtree(path, ignore_errors=True)


def _write(files: Files, target: Path, force: bool, shown: str, fleet: str | None,
           inputs: tuple[str, ...]) -> list[str]:
    if target.exists() and not target.is_dir():
        raise OrchgenError("exists and is not a directory", shown)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target, shown):
        return _write_locked(files, target, force, shown, fleet, inputs)


def _write_locked(files: Files, target: Path, force: bool, shown: str, fleet: str | None,
                  inputs: tuple[str, ...]) -> list[str]:
    if target.exists() and not target.is_dir():
        raise OrchgenError("exists and is not a directory", shown)
    carry, gone = _guard(files, target, force, shown, fleet, inputs)
    _remove_stale(target)  # left by a run that was killed mid-write
    stage = Path(tempfile.mkdtemp(prefix=f".{target.name}.orchgen-new-", dir=target.parent))
    try:
        # the operator's files win over the seeds (read last, so as late as possible before the swap)
        kept = _kept(target) if carry else {}
        for rel, data in sorted({**files, **kept, MARKER: manifest_bytes(files, fleet)}.items()):
            dest = stage / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        _modes(stage)
        _fsync_tree(stage)
        _, gone = _guard(files, target, force, shown, fleet, inputs)  # again: a file added meanwhile is refused
        if not target.exists():
            os.rename(stage, target)
            return gone
        if _exchange(stage, target):
            _remove_tree(stage)  # now holds the previous bundle
            return gone
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.orchgen-old-", dir=target.parent))
        with held():  # a signal between the two renames would leave no bundle at `target`
            os.rename(target, old / "b")
            os.rename(stage, target)
        _remove_tree(old)
        return gone
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


# orchgen's own files of a bundle it reads to decide whose the folder is (the marker, plan.json): far
# below this, which a committed folder of a stranger's may still exceed (spec.inputs.MAX_INPUT_BYTES)
_MAX_OWN = 16 << 20
MAX_READ = 1 << 30  # a bundle file orchgen compares (--check, --diff, --against); validate reads at most 16 MiB
OUTSIDE = "is a symbolic link leading outside the bundle: not read"


def _inside(path: str, top: str) -> bool:
    return path.startswith(top.rstrip(os.sep) + os.sep)


def read_inside(root: str | os.PathLike[str], rel: str, limit: int = MAX_READ,
                top: str | os.PathLike[str] | None = None) -> bytes:
    """The one way orchgen reads a file of a bundle folder (`plan --check/--diff`, `validate`, `validate
    --against`): the bytes of `root`/`rel`, where every link on the way is resolved and the file must
    stay inside `top` (default `root`; a cluster's folder reads inside its whole bundle). A link leading
    out is LinkOutside, a FIFO, device, directory or file over `limit` is spec.inputs.Refused, each
    before a byte is read; the file opened is checked again to be the one inside (a link swapped in
    between is refused too). OSError (no such file, no permission) is left to the caller."""
    from .spec.inputs import Refused, _kind  # imported here: `plan` alone never needs them

    top_real = os.path.realpath(top if top is not None else root)
    real = os.path.realpath(os.path.join(root, rel))
    if not _inside(real, top_real):
        raise LinkOutside(OUTSIDE)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the resolved path became a link meanwhile
            raise LinkOutside(OUTSIDE) from None
        raise
    try:
        try:
            opened = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            opened = real
        if not _inside(opened, top_real):
            raise LinkOutside(OUTSIDE)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(f"is {_kind(st.st_mode)}, not a regular file")
        chunks, size = [], 0
        while size <= limit:
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


class LinkOutside(Exception):
    """A bundle file that is a symbolic link leading outside the bundle folder: never read."""


def listed(root: Path) -> list[Path]:
    """Every file of a bundle folder, links included (links to directories are not entered)."""
    return sorted(p for p in Path(root).rglob("*") if p.is_symlink() or p.is_file())


def _read_or_note(root: Path, rel: str) -> bytes | str:
    """A bundle file's bytes for --check; else why it was not read (a link out, a FIFO, a huge file)."""
    from .spec.inputs import Refused

    try:
        return read_inside(root, rel)
    except LinkOutside:
        return OUTSIDE
    except Refused as exc:
        return f"not read: it {exc}"
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"


@dataclass(frozen=True)
class Diff:
    """How a bundle on disk differs from the one a plan would write (`plan --diff`)."""

    changed: tuple[str, ...]
    missing: tuple[str, ...]  # would be written, not on disk
    extra: tuple[str, ...]  # on disk, would not be written
    unread: tuple[tuple[str, str], ...] = ()  # (changed path, why it was not read): a link out, a FIFO ...

    def __bool__(self) -> bool:
        return bool(self.changed or self.missing or self.extra)

    def lines(self) -> list[str]:
        """One line per path, fit to print (a file name on disk may hold terminal escapes)."""
        from .errors import fit_to_print

        why = dict(self.unread)
        return [fit_to_print(line) for line in
                [f"changed: {p}" + (f" ({why[p]})" if p in why else "") for p in self.changed]
                + [f"missing: {p}" for p in self.missing] + [f"extra:   {p}" for p in self.extra]]


def diff(files: Files, target: Path) -> Diff:
    target = Path(target)
    on_disk: set[str] = set()
    if target.is_dir():
        on_disk = {path.relative_to(target).as_posix() for path in listed(target)}
    on_disk.discard(MARKER)
    on_disk = {p for p in on_disk if not operator_owned(p)}
    ours = {p: data for p, data in files.items() if not operator_owned(p)}
    read = {p: _read_or_note(target, p) for p in ours if p in on_disk}
    changed = sorted(p for p, data in read.items() if data != ours[p])
    unread = tuple((p, data) for p, data in sorted(read.items()) if isinstance(data, str))
    return Diff(tuple(changed), tuple(sorted(set(ours) - on_disk)), tuple(sorted(on_disk - set(ours))), unread)
