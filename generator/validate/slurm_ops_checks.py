"""Checks of a bundle's GPU-node operations (slurm/slurm.conf with nhc.conf, gpu-health.sh, plugstack.conf,
task-prolog.sh, nccl.env): what would leave a setting without its file, a file no setting uses, or a
setting the Slurm version cannot load.

- HealthCheckProgram set but the bundle has no nhc.conf (NHC would run a config nobody wrote); an
  interval of 0 (never runs); an nhc.conf nobody runs; nhc.conf's GPU checks against slurm.conf's
  Gres= of the same nodes (a count or type that differs drains healthy nodes), and gpu-health.sh shipped;
- switch/nvidia_imex on a Slurm version without it (before 24.05);
- a backup controller (two or more SlurmctldHost lines) with a host-local StateSaveLocation: unset
  (/var/spool), or under /var/spool, /var/lib, /var/tmp, /var/run, /tmp, /run or /dev/shm. Those
  trees are each machine's own (FHS 3.0), so the backup would take over with none of the primary's
  jobs; and a shared filesystem mounted there hides a failed mount, since slurmctld then starts on
  the empty local directory. A shared StateSaveLocation lives at a path only the shared mount makes;
- TaskProlog naming /etc/slurm/<script> the bundle does not ship, and task-prolog.sh without nccl.env;
- plugstack.conf lines that are not `required|optional PLUGIN [ARGS]` or `include GLOB` (spank(8)),
  and an include that matches no file of the bundle;
- MpiDefault=pmix before Slurm 23.11: its mpi/pmix opens libpmix.so, which only PMIx's development
  package installs (SchedMD bug 14868, fixed in 23.02.5), so a warning.
"""
from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Iterator

from ..spec import hostlist
from .bundle_view import Bundle, Finding, error, warning
from .slurm_conf import SlurmConf

CONF, NHC, GPU_HEALTH = "slurm/slurm.conf", "slurm/nhc.conf", "slurm/gpu-health.sh"
PLUGSTACK, TASK_PROLOG, NCCL_ENV = "slurm/plugstack.conf", "slurm/task-prolog.sh", "slurm/nccl.env"
IMEX_MIN = (24, 5)
PMIX_SO2 = (23, 11)
HOST_LOCAL = ("/var/spool", "/var/lib", "/var/tmp", "/var/run", "/tmp", "/run", "/dev/shm")
DEFAULT_STATE_SAVE = "/var/spool"  # slurm.conf(5) StateSaveLocation's default
_ETC = "/etc/slurm/"


def check(bundle: Bundle, conf: SlurmConf, version: tuple[int, int] | None, version_text: str | None) -> Iterator[Finding]:
    yield from _health(bundle, conf)
    yield from _imex(conf, version, version_text)
    yield from _state_save(conf)
    yield from _task_prolog(bundle, conf)
    yield from _plugstack(bundle)
    yield from _mpi(conf, version, version_text)


def _health(bundle: Bundle, conf: SlurmConf) -> Iterator[Finding]:
    program, line = conf.param("HealthCheckProgram")
    interval, interval_line = conf.param("HealthCheckInterval")
    if program and not bundle.has(NHC):
        yield error(CONF, line, f"HealthCheckProgram={program}, but the bundle has no {NHC}: the program would "
                                "check what nobody configured (orchgen writes nhc.conf for LBNL NHC)")
    if program and (interval or "0").strip() in ("", "0"):
        yield warning(CONF, interval_line or line, "HealthCheckInterval is 0 or unset: slurmd never runs "
                                                   f"HealthCheckProgram={program} (slurm.conf(5))")
    if bundle.has(NHC) and not program:
        yield warning(NHC, 0, "no HealthCheckProgram in slurm.conf: nothing runs these checks")
    if bundle.has(NHC):
        yield from _nhc_gpus(bundle, conf)


_GPU_CHECK = re.compile(r"gpu-health\.sh\s+(\S+)\s+(\S+)")


_MIG_PROFILE = re.compile(r"^\d+g\.\d+gb$")  # a MIG GRES type (gpu:1g.10gb:56): NVML names its instances


def _gpus_agree(gres: dict, count: int | None, gtype: str) -> bool:
    """nvidia-smi lists the physical GPUs; slurm.conf counts them, or on a MIG node their instances
    (count x instances per GPU, under the profile's name)."""
    if gres.get(("gpu", gtype)) == count:
        return True
    if gres.get(("gpu", None)) == count:  # an untyped GRES (gpu.typed: false): nvidia-smi checks the model
        return True
    mig = [v for (name, kind), v in gres.items() if name == "gpu" and kind and _MIG_PROFILE.match(kind)]
    return bool(mig and count) and all(v % count == 0 for v in mig)


def _nhc_gpus(bundle: Bundle, conf: SlurmConf) -> Iterator[Finding]:
    """Each `TARGET || ... gpu-health.sh COUNT TYPE` line against the Gres= of the nodes it targets."""
    gres_of = {name: node.gres for node in conf.nodes for name in node.names}
    uses_script = False
    for number, raw in enumerate((bundle.text(NHC) or "").splitlines(), 1):
        if raw.lstrip().startswith("#") or "||" not in raw:
            continue
        target, check = (part.strip() for part in raw.split("||", 1))
        m = _GPU_CHECK.search(check)
        if not m:
            continue
        uses_script = True
        count, gtype = m.groups()
        nodes = _nhc_nodes(target, gres_of)
        if nodes is None:
            yield warning(NHC, number, f"target {target!r} is not a node range orchgen can check")
            continue
        unknown = [n for n in nodes if n not in gres_of]
        if unknown:
            yield warning(NHC, number, f"targets nodes slurm.conf does not define: {_short(unknown)}")
        wrong = [n for n in nodes if n in gres_of and not _gpus_agree(gres_of[n], _int(count), gtype)]
        if wrong:
            have = ",".join(f"{k[0]}:{k[1]}:{v}" if k[1] else f"{k[0]}:{v}" for k, v in gres_of[wrong[0]].items())
            yield error(NHC, number, f"expects {count}x {gtype} GPUs on {_short(wrong)}, but slurm.conf gives them "
                                     f"Gres={have or 'none'}: NHC would drain nodes that are as configured")
    if uses_script and not bundle.has(GPU_HEALTH):
        yield error(NHC, 0, f"GPU checks run gpu-health.sh, but the bundle has no {GPU_HEALTH}")


def _nhc_nodes(target: str, known: dict) -> list[str] | None:
    """The nodes an NHC match string names: `{a[01-04],b}` node ranges, `*`-style globs; None for a
    regular expression or a negation (their node set is open-ended)."""
    if target.startswith(("!", "/")):
        return None
    if target.startswith("{") and target.endswith("}"):
        try:
            return hostlist.expand(target[1:-1])
        except hostlist.HostlistError:
            return None
    return [n for n in known if fnmatch.fnmatchcase(n, target)]


def _int(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def _short(nodes: list[str]) -> str:
    text = hostlist.compress(nodes)
    return text if len(text) <= 100 else text[:97] + "..."


def _imex(conf: SlurmConf, version: tuple[int, int] | None, version_text: str | None) -> Iterator[Finding]:
    switch, line = conf.param("SwitchType")
    if (switch or "").lower() == "switch/nvidia_imex" and version and version < IMEX_MIN:
        yield error(CONF, line, f"SwitchType=switch/nvidia_imex needs Slurm 24.05 or newer; this bundle is for "
                                f"Slurm {version_text} (slurmctld: \"Can't find plugin for switch/nvidia_imex\")")


def _state_save(conf: SlurmConf) -> Iterator[Finding]:
    hosts = conf.all("SlurmctldHost") or conf.all("ControlMachine")
    if len(hosts) < 2:
        return
    path, line = conf.param("StateSaveLocation")
    where = path or DEFAULT_STATE_SAVE
    local = next((d for d in HOST_LOCAL if where == d or where.startswith(d + "/")), None)
    if local:
        what = f"StateSaveLocation={path}" if path else f"StateSaveLocation is unset ({DEFAULT_STATE_SAVE})"
        yield error(CONF, line or hosts[1][1],
                    f"{len(hosts)} SlurmctldHost lines, but {what} is under {local}, each host's own: the backup "
                    "would take over without the primary's jobs. Put it on a filesystem every controller "
                    "mounts, at a path only that mount makes (a missing mount then stops slurmctld instead "
                    "of starting it empty)")


def _task_prolog(bundle: Bundle, conf: SlurmConf) -> Iterator[Finding]:
    prolog, line = conf.param("TaskProlog")
    # orchgen's own TaskProlog must ship with the bundle; another name is the site's own program (`orchgen
    # import slurm` carries the site's TaskProlog as written, and says so), which the site installs
    if prolog == _ETC + "task-prolog.sh" and not bundle.has(TASK_PROLOG):
        yield error(CONF, line, f"TaskProlog={prolog}, but the bundle has no {TASK_PROLOG}")
    if bundle.has(TASK_PROLOG) and "nccl.env" in (bundle.text(TASK_PROLOG) or "") and not bundle.has(NCCL_ENV):
        yield error(TASK_PROLOG, 0, f"reads nccl.env beside it, but the bundle has no {NCCL_ENV}")


def _plugstack(bundle: Bundle) -> Iterator[Finding]:
    if not bundle.has(PLUGSTACK):
        return
    for path in [PLUGSTACK] + [p for p in bundle.files if p.startswith("slurm/plugstack.conf.d/")]:
        for number, raw in enumerate((bundle.text(path) or "").splitlines(), 1):
            body = raw.split("#", 1)[0].strip()
            if not body:
                continue
            try:
                words = shlex.split(body)
            except ValueError:
                words = body.split()
            if words[0] == "include" and len(words) == 2:
                if not words[1].startswith("/"):
                    pattern = f"slurm/{words[1]}"
                    if not any(fnmatch.fnmatchcase(f, pattern) for f in bundle.files):
                        yield warning(path, number, f"include {words[1]} matches no file of the bundle")
            elif words[0] not in ("required", "optional") or len(words) < 2:
                yield error(path, number, f"not a SPANK line (required|optional PLUGIN [ARGS], or include GLOB; "
                                          f"spank(8)): {body[:80]!r}")


def _mpi(conf: SlurmConf, version: tuple[int, int] | None, version_text: str | None) -> Iterator[Finding]:
    mpi, line = conf.param("MpiDefault")
    if (mpi or "").lower() == "pmix" and version and version < PMIX_SO2:
        yield warning(CONF, line, f"MpiDefault=pmix on Slurm {version_text}: its mpi/pmix opens libpmix.so, which "
                                  "only PMIx's development package installs (SchedMD bug 14868, fixed in 23.02.5); "
                                  "without it every srun fails")
