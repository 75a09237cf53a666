"""`pool.facts`: the facts `orchgen discover` read from the pool's hosts, as the pool's own hardware facts.

`facts: facts.yaml` (relative to workload.yaml, confined like fabric.from) names the file discover wrote. For
every field the pool does not give itself, the loader takes what the pool's hosts report, when they all
agree (a pool is one kind of node; hosts that differ are a drift to fix, so the plan refuses to guess):
- the CPU layout: `slurmd_c` (the line `slurmd -C` printed), else `cpu` from lscpu; only where the pool
  gives none of slurmd_c, cpu, cpus and platform;
- the GPUs' CPU sockets: `gpu.sockets` (gres.conf Cores=), from `nvidia-smi topo -m`'s NUMA affinity of GPUs
  0..count-1 and each NUMA node's socket; only where the pool gives no gpu.sockets, no MIG layout, no AutoDetect
  (which finds the affinity itself), and no platform that fixes them, and the topo lists exactly the pool's GPUs;
- the RDMA ports: `nics` (device, port, netdev, rate as /sys/class/infiniband reports them), where the pool
  gives none: the role and GPU of a port come from the pool's platform where it names the device; other
  ports are compute rails when their link layer is the fabric's (InfiniBand on infiniband, Ethernet on
  roce), storage otherwise.
Hosts of the pool the file lacks, or could not read, are left out; a file with none of them is refused.
The pool's own fields always win: discover reports where they and the hosts differ.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..errors import OrchgenError
from . import inputs, platforms

MAX_FACTS_BYTES = 16 << 20
_LAYER = {"infiniband": "InfiniBand", "roce": "Ethernet"}


class FactsProblem(Exception):
    def __init__(self, message: str, path: tuple) -> None:
        super().__init__(message)
        self.message, self.path = message, path


def read(base: Path, rel: str, roots: tuple[str, ...], at: tuple) -> dict[str, Any]:
    """The hosts of the facts file `rel` (its `hosts` mapping)."""
    try:
        path = inputs.confine(base, rel, roots)
        raw = inputs.read_bounded(path, MAX_FACTS_BYTES)
    except inputs.Refused as exc:
        raise FactsProblem(str(exc), at) from None
    except OSError as exc:
        raise FactsProblem(f"cannot read {rel[:80]} (relative to workload.yaml): {exc.strerror}", at) from None
    try:
        doc = yaml.safe_load(raw.decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        mark = getattr(exc, "problem_mark", None)
        raise OrchgenError("not YAML", str(path), mark.line + 1 if mark else None) from None
    if not isinstance(doc, dict) or doc.get("kind") != "Facts" or not isinstance(doc.get("hosts"), dict):
        raise OrchgenError("not a facts file of `orchgen discover` (kind: Facts, hosts: ...)", str(path), None, "kind")
    return doc["hosts"]


def _cpu(f: dict) -> tuple | None:
    cpu = f.get("cpu")
    if isinstance(cpu, dict):
        return tuple(cpu.get(k) for k in ("sockets", "cores_per_socket", "threads_per_core"))
    return None


def fill(pool: dict[str, Any], names: list[str], hosts: dict[str, Any], fabric_kind: str, at: tuple) -> dict:
    """`pool` (its raw mapping) with what its hosts' facts give and it does not."""
    read_ok = {n: hosts[n] for n in names if isinstance(hosts.get(n), dict) and "error" not in hosts[n]}
    if not read_ok:
        raise FactsProblem(f"the facts file has none of the pool's {len(names)} hosts ({names[0]} ...): run "
                           "`orchgen discover` with an inventory that has them", at)
    first = sorted(read_ok)[0]
    out = dict(pool)
    if not any(k in pool for k in ("slurmd_c", "cpu", "cpus", "platform")):
        layouts = {n: _cpu(f) for n, f in read_ok.items()}
        other = sorted(n for n, c in layouts.items() if c != layouts[first])
        if other:
            raise FactsProblem(f"hosts {first} and {other[0]} report different CPU layouts "
                               f"({layouts[first]} and {layouts[other[0]]}): give the pool's cpu, or split it", at)
        line = read_ok[first].get("slurmd_c")
        if isinstance(line, str) and line.startswith("NodeName="):
            out["slurmd_c"] = line
        elif layouts[first] and all(isinstance(v, int) for v in layouts[first]):
            s, c, t = layouts[first]
            out["cpu"] = {"sockets": s, "cores_per_socket": c, "threads_per_core": t}
    sockets = _gpu_sockets(pool, read_ok, first, at)
    if sockets is not None:
        plat = platforms.PLATFORMS.get(pool.get("platform")) if isinstance(pool.get("platform"), str) else None
        gpu = pool.get("gpu") if isinstance(pool.get("gpu"), dict) else {"type": plat.gpu_type, "count": plat.gpu_count}
        out["gpu"] = {**gpu, "sockets": sockets}
    if "nics" not in pool:
        ports = {n: sorted((p.get("device"), p.get("port")) for p in f.get("nics") or [] if isinstance(p, dict))
                 for n, f in read_ok.items()}
        other = sorted(n for n, p in ports.items() if p != ports[first])
        if other:
            raise FactsProblem(f"hosts {first} and {other[0]} report different RDMA ports: fix the host, or give "
                               "the pool's nics", at)
        known = {n.device: n for n in (platforms.of(_Named(pool.get("platform"))) or _NoPlatform()).nics or ()}
        nics = []
        for p in read_ok[first].get("nics") or []:
            plat = known.get(p.get("device"))
            role = plat.role if plat else ("compute" if p.get("link_layer") == _LAYER.get(fabric_kind) else "storage")
            nic = {"device": p.get("device"), "port": p.get("port"), "rate_gbps": p.get("rate_gbps"), "role": role}
            if p.get("netdev"):
                nic["netdev"] = p["netdev"]
            if plat and plat.gpu is not None:
                nic["gpu"] = plat.gpu
            nics.append(nic)
        if nics:
            out["nics"] = nics
    return out


def _gpu_sockets(pool: dict[str, Any], read_ok: dict[str, Any], first: str, at: tuple) -> list[int] | None:
    """The socket of each of the pool's GPUs as its hosts' `nvidia-smi topo -m` shows them (a GPU's NUMA node, the
    first of its "NUMA Affinity", mapped to its socket by the host's /sys/devices/system/node), where the pool
    leaves them to be found (see the module's docstring); None where no host tells them all."""
    plat = platforms.PLATFORMS.get(pool.get("platform")) if isinstance(pool.get("platform"), str) else None
    gpu = pool.get("gpu")
    if gpu is None and plat is not None:
        gpu = {"count": plat.gpu_count}
    # (the pool is not validated yet: a count out of the schema's 1-64 is left for its own refusal)
    if not isinstance(gpu, dict) or type(gpu.get("count")) is not int or not 1 <= gpu["count"] <= 64 \
            or gpu.get("sockets") is not None \
            or gpu.get("mig") is not None or gpu.get("autodetect") not in (None, "off", False) \
            or (plat is not None and "gpu_sockets" not in plat.guessed):
        return None
    found: dict[str, tuple | None] = {}
    for name, f in read_ok.items():
        topo = f.get("topo") if isinstance(f.get("topo"), dict) else {}
        gpus = topo.get("gpus") if isinstance(topo.get("gpus"), list) else []
        rows = {r["index"]: r.get("numa") for r in gpus if isinstance(r, dict) and type(r.get("index")) is int}
        numa = f.get("numa_sockets") if isinstance(f.get("numa_sockets"), dict) else {}
        numa = {int(k): v for k, v in numa.items() if str(k).isdigit() and isinstance(v, int)}
        if sorted(rows) != list(range(gpu["count"])) or not all(isinstance(v, int) for v in rows.values()):
            found[name] = None
            continue
        # the socket of each GPU's NUMA node as the host said it; a node the host's map lacks is not guessed (one
        # socket can hold several NUMA nodes: AMD's NPS2/NPS4), so that host tells nothing
        found[name] = tuple(numa[rows[i]] for i in range(gpu["count"])) \
            if all(rows[i] in numa for i in range(gpu["count"])) else None
    if found[first] is None:
        return None
    other = sorted(n for n, v in found.items() if v is not None and v != found[first])
    if other:
        raise FactsProblem(f"hosts {first} and {other[0]} have their GPUs on different sockets ({list(found[first])} "
                           f"and {list(found[other[0]])}, nvidia-smi topo -m): give the pool's gpu.sockets, or split it",
                           at)
    return list(found[first])


class _Named:
    def __init__(self, platform: Any) -> None:
        self.platform = platform if isinstance(platform, str) else None


class _NoPlatform:
    nics = None
