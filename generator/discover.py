"""`orchgen discover`: read the Slurm hosts as they are, write their facts, and report every difference from
the fleet model (a drift check that can run at any time).

Over the bring-up's SSH inventory (the operator's hosts.yaml: each host's `ansible_host`, `ansible_user`,
`ansible_port`, `ansible_ssh_private_key_file`, `ansible_ssh_common_args`, as Ansible reads them), one
`ssh HOST sh -s` per host runs a read-only script (FACTS_SCRIPT) that prints:
- `slurmd -C` (where slurmd is installed) and lscpu's sockets, cores per socket and threads per core;
- `nvidia-smi --query-gpu=index,name,pci.bus_id` and each GPU's "Fabric" block of `nvidia-smi -q` (State,
  Status, CliqueId, ClusterUUID: the NVLink domain of a GB200 NVL72 tray);
- every RDMA port of /sys/class/infiniband: state, physical state, rate, link layer, and its netdev the way
  `ibdev2netdev` finds it (/sys/class/infiniband/DEV/device/net/*, dev_port + 1 = the port);
- `nvidia-smi topo -m`: each GPU's link to each NIC (X, PIX, PXB, PHB, NODE, SYS, NV#: the Legend nvidia-smi
  prints under the matrix), its CPU and NUMA affinity, and the NIC Legend (NICn: mlx5_N) that names the columns;
  with each CPU NUMA node's socket (/sys/devices/system/node/nodeN/cpulist, the first CPU's
  topology/physical_package_id), so a host with several NUMA nodes per socket (SNC, NPS) is read right.
Bounded: ssh in batch mode (no prompt) with a connect timeout, the whole host within --timeout seconds,
at most MAX_OUTPUT bytes read, hosts read side by side. Nothing from the inventory but the host names is
printed (no key path, no password); what a host answers is made printable and cut before it is shown.

The model each host is compared with is the Slurm plane's (render/slurm/model.py: the pool's CPU layout,
GPU count and type, RDMA rails with their rates and netdevs, NVLink domain), so the drift lines name what
slurm.conf, gres.conf, nhc.conf and NCCL_IB_HCA were written from.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import OrchgenError, cut, printable

MAX_OUTPUT = 1 << 20  # bytes read from one host
MAX_HOSTS = 4096
PARALLEL = 16
CONNECT_TIMEOUT = 10

# Read-only; every command bounded by `timeout`; sections start with "@@ name".
FACTS_SCRIPT = r"""export LC_ALL=C PATH="$PATH:/usr/sbin:/sbin:/usr/bin:/bin"
echo '@@ slurmd'
command -v slurmd >/dev/null 2>&1 && timeout 10 slurmd -C 2>/dev/null | head -n 1
echo '@@ lscpu'
timeout 10 lscpu 2>/dev/null | grep -E '^(Socket\(s\)|Core\(s\) per socket|Thread\(s\) per core|CPU\(s\)):'
echo '@@ gpus'
command -v nvidia-smi >/dev/null 2>&1 && timeout 20 nvidia-smi --query-gpu=index,name,pci.bus_id --format=csv,noheader 2>&1 | head -n 64
echo '@@ fabric'
command -v nvidia-smi >/dev/null 2>&1 && timeout 20 nvidia-smi -q 2>/dev/null | awk '
    /^GPU [0-9A-Fa-f]+:/ { print "GPU " $2; next }
    /^    Fabric$/ { f = 1; next }
    /^    [^ ]/ { f = 0 }
    f && /^        [^ ]/ { print }' | head -n 512
echo '@@ rdma'
for d in /sys/class/infiniband/*; do
    [ -d "$d/ports" ] || continue
    dev=${d##*/}
    for p in "$d"/ports/*; do
        port=${p##*/}
        nd=
        for n in "$d"/device/net/*; do
            [ -e "$n" ] || continue
            dp=$(cat "$n/dev_port" 2>/dev/null || echo 0)
            [ "$((dp + 1))" = "$port" ] && nd=${n##*/}
        done
        echo "$dev|$port|$(cat "$p/state" 2>/dev/null)|$(cat "$p/phys_state" 2>/dev/null)|$(cat "$p/rate" 2>/dev/null)|$(cat "$p/link_layer" 2>/dev/null)|$nd"
    done
done | head -n 128
echo '@@ topo'
command -v nvidia-smi >/dev/null 2>&1 && timeout 20 nvidia-smi topo -m 2>&1 | head -n 256 | cut -c 1-4096
echo '@@ numa'
for n in /sys/devices/system/node/node[0-9]*; do
    [ -r "$n/cpulist" ] || continue
    c=$(sed 's/[-,].*//' "$n/cpulist" 2>/dev/null)
    [ -n "$c" ] && echo "${n##*/node}|$(cat "/sys/devices/system/cpu/cpu$c/topology/physical_package_id" 2>/dev/null)"
done | head -n 256
echo '@@ end'
"""


@dataclass
class Host:
    name: str
    address: str
    user: str | None = None
    port: int | None = None
    key: str | None = None
    ssh_args: list[str] = field(default_factory=list)


def _text(value: Any, n: int = 200) -> str:
    return cut(printable(str(value)), n)


def read_inventory(path: str) -> list[Host]:
    """The hosts of an Ansible YAML inventory (all: hosts/vars/children), each with its merged vars."""
    from .spec.inputs import Refused, read_bounded

    try:  # a regular file of at most 16 MiB: a FIFO hung here, and /dev/zero was read until memory ran out
        text = read_bounded(path).decode("utf-8", errors="replace")
    except Refused as exc:
        raise OrchgenError(str(exc), path) from None
    except OSError as exc:
        raise OrchgenError(f"cannot read: {exc.strerror or exc}", path) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise OrchgenError(f"not YAML: {_text(getattr(exc, 'problem', exc))}", path,
                           mark.line + 1 if mark else None) from None
    if not isinstance(data, dict) or not isinstance(data.get("all", {}), dict):
        raise OrchgenError("an Ansible YAML inventory starts with `all:` (hosts, vars, children)", path, None, "all")
    found: dict[str, dict] = {}

    def walk(group: Any, inherited: dict, where: str) -> None:
        if group is None:
            return
        if not isinstance(group, dict):
            raise OrchgenError("a group is a mapping of hosts, vars and children", path, None, where)
        own = {**inherited, **(group.get("vars") or {})}
        hosts = group.get("hosts") or {}
        if not isinstance(hosts, dict):
            raise OrchgenError("hosts is a mapping of host names", path, None, f"{where}.hosts")
        for name, hv in hosts.items():
            if hv is not None and not isinstance(hv, dict):
                raise OrchgenError("a host's vars are a mapping", path, None, f"{where}.hosts.{_text(name, 60)}")
            found[str(name)] = {**found.get(str(name), {}), **own, **(hv or {})}
            if len(found) > MAX_HOSTS:
                raise OrchgenError(f"more than {MAX_HOSTS} hosts", path, None, f"{where}.hosts")
        children = group.get("children") or {}
        if not isinstance(children, dict):
            raise OrchgenError("children is a mapping of groups", path, None, f"{where}.children")
        for cname, child in children.items():
            walk(child, own, f"{where}.children.{_text(cname, 60)}")

    walk(data.get("all") or {}, {}, "all")
    out = []
    for name, v in sorted(found.items()):
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}", name):
            raise OrchgenError("not a host name", path, None, f"hosts.{_text(name, 60)}")
        port = v.get("ansible_port")
        if port is not None and not (isinstance(port, int) and 0 < port < 65536):
            raise OrchgenError("a TCP port (1-65535)", path, None, f"hosts.{name}.ansible_port")
        address = str(v.get("ansible_host") or name)
        if address.startswith("-") or any(c.isspace() for c in address):
            raise OrchgenError("not a host address", path, None, f"hosts.{name}.ansible_host")
        user = v.get("ansible_user")
        if user is not None and (str(user).startswith("-") or not str(user).isprintable() or " " in str(user)):
            raise OrchgenError("not a user name", path, None, f"hosts.{name}.ansible_user")
        key = v.get("ansible_ssh_private_key_file")
        args = v.get("ansible_ssh_common_args") or ""
        try:
            ssh_args = shlex.split(str(args))
        except ValueError:
            raise OrchgenError("not a shell-quoted list of ssh options", path, None,
                               f"hosts.{name}.ansible_ssh_common_args") from None
        out.append(Host(name, address, str(user) if user is not None else None, port,
                        os.path.expanduser(str(key)) if key else None, ssh_args))
    return out


def _ssh(host: Host, timeout: float) -> tuple[str | None, str | None]:
    """(output, None) or (None, why not), within `timeout` seconds."""
    argv = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT}", "-o", "LogLevel=ERROR",
            *host.ssh_args]
    if host.key:
        argv += ["-i", host.key]
    if host.port:
        argv += ["-p", str(host.port)]
    argv += ["--", f"{host.user}@{host.address}" if host.user else host.address, "sh", "-s"]
    try:
        proc = subprocess.run(argv, input=FACTS_SCRIPT.encode(), capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"no answer within {timeout:g} s"
    except OSError as exc:
        return None, f"ssh: {exc.strerror or exc}"
    if proc.returncode != 0 or b"@@ end" not in proc.stdout[-64:]:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        return None, f"ssh exit {proc.returncode}: {_text(err[-1] if err else 'no output', 160)}"
    return proc.stdout[:MAX_OUTPUT].decode(errors="replace"), None


def _sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("@@ "):
            current = line[3:].strip()
            out[current] = []
        elif current:
            out[current].append(line)
    return out


def parse(text: str) -> dict[str, Any]:
    """A host's facts from FACTS_SCRIPT's output."""
    s = _sections(text)
    facts: dict[str, Any] = {}
    slurmd = [ln.strip() for ln in s.get("slurmd", []) if ln.strip().startswith("NodeName=")]
    if slurmd:
        facts["slurmd_c"] = _text(slurmd[0], 1000)
        kv = dict(p.split("=", 1) for p in slurmd[0].split() if "=" in p)
        for key, name in (("CPUs", "cpus"), ("RealMemory", "real_memory_mib")):
            if kv.get(key, "").isdigit():
                facts[name] = int(kv[key])
        try:
            boards = int(kv.get("Boards", 1))
            facts["cpu"] = {"sockets": boards * int(kv["SocketsPerBoard"]), "cores_per_socket": int(kv["CoresPerSocket"]),
                            "threads_per_core": int(kv["ThreadsPerCore"])}
        except (KeyError, ValueError):
            pass
    if "cpu" not in facts:
        kv = {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in s.get("lscpu", []))}
        try:
            facts["cpu"] = {"sockets": int(kv["Socket(s)"]), "cores_per_socket": int(kv["Core(s) per socket"]),
                            "threads_per_core": int(kv["Thread(s) per core"])}
        except (KeyError, ValueError):
            facts["cpu"] = None
    gpus = []
    for line in s.get("gpus", []):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit():
            gpus.append({"index": int(parts[0]), "name": _text(parts[1], 80), "bus": _text(parts[2], 40)})
    facts["gpus"] = gpus
    bus, fabric = None, {}
    for line in s.get("fabric", []):
        if line.startswith("GPU "):
            bus = line[4:].strip()
        elif bus and ":" in line:
            k, _, v = line.partition(":")
            fabric.setdefault(bus, {})[k.strip()] = _text(v.strip(), 80)
    for g in gpus:
        f = fabric.get(g["bus"])
        if f:
            g["fabric"] = {"state": f.get("State"), "status": f.get("Status"), "clique_id": f.get("CliqueId"),
                           "cluster_uuid": f.get("ClusterUUID")}
    nics = []
    for line in s.get("rdma", []):
        parts = line.split("|")
        if len(parts) != 7 or not parts[1].isdigit():
            continue
        dev, port, state, phys, rate, layer, netdev = parts
        m = re.match(r"\s*(\d+)", rate)
        nics.append({"device": _text(dev, 40), "port": int(port), "netdev": _text(netdev, 40) or None,
                     "rate_gbps": int(m.group(1)) if m else None,
                     "state": _text(state.split(":")[-1].strip(), 20), "phys_state": _text(phys.split(":")[-1].strip(), 20),
                     "link_layer": _text(layer, 20)})
    facts["nics"] = nics
    facts["topo"] = parse_topo(s.get("topo", []))
    numa: dict[int, int] = {}
    for line in s.get("numa", [])[:MAX_TOPO_LINES]:
        node, _, pkg = line.partition("|")
        if node.strip().isdigit() and pkg.strip().isdigit():
            numa[int(node)] = int(pkg)
    if numa:
        facts["numa_sockets"] = numa
    return facts


# `nvidia-smi topo -m` (nvidia-smi(1), "topo"; the Legend it prints under the matrix): how a GPU reaches another
# device. X self; PIX at most one PCIe bridge (the same PCIe switch); PXB several bridges, no host bridge; PHB
# through a PCIe host bridge (the CPU); NODE between host bridges within a NUMA node; SYS across the SMP
# interconnect between NUMA nodes (QPI/UPI); NV# a bonded set of # NVLinks. SOC is the older drivers' name of
# SYS. NCCL_NET_GDR_LEVEL (NCCL's environment variables) takes the same names for how far a NIC may sit from a GPU
# for GPUDirect RDMA; a rail meant for one GPU sits PIX or PXB to it (the DGX H100 User Guide's "Network
# Modules" table pairs each compute port with the GPU behind its PCIe switch: generator/spec/platforms.py).
LINK = re.compile(r"X|PIX|PXB|PHB|NODE|SYS|SOC|NV\d{1,3}")
NEAR = ("PIX", "PXB")
MAX_TOPO_LINES = 512
MAX_TOPO_COLUMNS = 256


def parse_topo(lines: list[str]) -> dict[str, Any] | None:
    """`nvidia-smi topo -m`'s matrix as {"gpus": [{index, numa, cpu_affinity, gpu_numa_id, nics: {device: link}}],
    "named": whether the NIC columns carry device names, "notes": [...]}; None when nvidia-smi printed nothing.

    The layouts drivers print: cells aligned with spaces or separated by tabs (an empty cell before GPU NUMA ID,
    empty trailing cells on NIC rows); trailing columns "CPU Affinity", then "NUMA Affinity" (a node, a list of
    nodes on a GB200 whose GPU memory is NUMA nodes of its own: the first is the CPU's), then "GPU NUMA ID" (5xx
    drivers); NIC columns named NIC0... with a "NIC Legend" (NICn: mlx5_N) under the matrix, or, in older
    drivers, by the device itself (mlx5_0); a line before the matrix ("76 NICs found in the topology, only
    displaying 56 in the matrix."). Anything else is noted, never raised."""
    lines = [printable(ln.replace("\t", " "))[:4096] for ln in lines[:MAX_TOPO_LINES]]
    if not any(ln.strip() for ln in lines):
        return None
    notes: list[str] = []
    # the header: GPU0 first, then another column's name (a row has GPU0 first, then a link cell)
    head = next((i for i, ln in enumerate(lines)
                 if ln.split()[:1] == ["GPU0"] and not LINK.fullmatch((ln.split() + ["X"])[1])), None)
    if head is None:
        first = next(ln.strip() for ln in lines if ln.strip())
        return {"gpus": [], "named": False, "notes": [f"no GPU matrix: {_text(first, 160)}"]}
    for ln in lines[:head]:
        if ln.strip():
            notes.append(_text(ln.strip(), 160))
    header = lines[head]
    cols, _, tail = header.partition("CPU Affinity")
    devices = cols.split()[:MAX_TOPO_COLUMNS]
    extra = (["cpu_affinity"] if "CPU Affinity" in header else []) + (["numa"] if "NUMA Affinity" in tail else []) \
        + (["gpu_numa_id"] if "GPU NUMA ID" in tail else [])
    legend: dict[str, str] = {}
    in_legend = False
    for ln in lines[head + 1:]:
        if ln.strip() == "NIC Legend:":
            in_legend = True
            continue
        m = re.fullmatch(r"\s*(NIC\d+):\s*([A-Za-z0-9_.:-]{1,64})\s*", ln)
        if in_legend and m:
            legend[m.group(1)] = m.group(2)
    nic_cols = [(i, d) for i, d in enumerate(devices) if not re.fullmatch(r"GPU\d+", d)]
    named = all(not re.fullmatch(r"NIC\d+", d) or d in legend for _, d in nic_cols)
    if nic_cols and not named:
        notes.append("no NIC Legend: the NIC columns are not named by device")
    gpus: list[dict[str, Any]] = []
    seen: set[int] = set()
    for ln in lines[head + 1:]:
        if ln.strip() in ("Legend:", "NIC Legend:"):
            break
        tokens = ln.split()
        if not tokens or not re.fullmatch(r"GPU\d{1,4}", tokens[0]):
            continue
        index = int(tokens[0][3:])
        cells, rest = tokens[1:1 + len(devices)], tokens[1 + len(devices):]
        if len(cells) < len(devices) or not all(LINK.fullmatch(c) for c in cells) or index in seen:
            notes.append(f"row {_text(tokens[0], 12)}: not {len(devices)} link cells; left out")
            continue
        seen.add(index)
        values = dict(zip(extra, rest))
        numa = re.match(r"(\d+)", values.get("numa", ""))
        gpu_numa = values.get("gpu_numa_id", "")
        gpus.append({"index": index, "numa": int(numa.group(1)) if numa else None,
                     "cpu_affinity": _text(values["cpu_affinity"], 80) if "cpu_affinity" in values else None,
                     "gpu_numa_id": int(gpu_numa) if gpu_numa.isdigit() else None,
                     "nics": {_text(legend.get(d, d), 64): cells[i] for i, d in nic_cols}})
    return {"gpus": gpus, "named": named, "notes": notes[:16]}


def gather(hosts: list[Host], timeout: float) -> dict[str, dict[str, Any]]:
    def one(h: Host) -> tuple[str, dict[str, Any]]:
        text, why = _ssh(h, timeout)
        return h.name, ({"error": why} if text is None else parse(text))

    with ThreadPoolExecutor(max_workers=min(PARALLEL, max(1, len(hosts)))) as pool:
        return dict(pool.map(one, hosts))


def _squash(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def drift(plan, facts: dict[str, dict[str, Any]]) -> list[str]:
    """Every difference between the Slurm model of `plan` and the hosts' facts, one line each."""
    from .render.slurm.model import model

    m = model(plan)
    lines: list[str] = []
    domain_of = {n: d.name for d in plan.fabric.domains for n in d.nodes}
    cliques: dict[str, dict[str, str]] = {}
    for g in m.groups:
        hw = g.hw
        for node in g.nodes:
            f = facts.get(node)
            if f is None:
                lines.append(f"{node}: not in the inventory (pool {g.pool})")
                continue
            if "error" in f:
                lines.append(f"{node}: not read: {f['error']}")
                continue
            cpu = f.get("cpu")
            want = {"sockets": hw.sockets, "cores_per_socket": hw.cores_per_socket, "threads_per_core": hw.threads_per_core}
            if cpu and cpu != want:
                lines.append(f"{node}: CPU {cpu['sockets']}x{cpu['cores_per_socket']}x{cpu['threads_per_core']} "
                             f"(sockets x cores x threads), the model has "
                             f"{hw.sockets}x{hw.cores_per_socket}x{hw.threads_per_core} (pool {g.pool})")
            # slurmd -C's CPUs= (threads) against slurm.conf's, where that counts threads too (a pool with
            # cpu_count: cores gives CPUs= as cores, which slurmd accepts: slurm.conf(5), CPUs)
            if f.get("cpus") is not None and not hw.cpus_are_cores and f["cpus"] != g.cpus:
                lines.append(f"{node}: slurmd -C says CPUs={f['cpus']}, slurm.conf has CPUs={g.cpus} (pool {g.pool})")
            # a node registering less memory than its RealMemory is drained ("Low RealMemory", slurm.conf(5))
            if f.get("real_memory_mib") is not None and f["real_memory_mib"] < g.real_memory:
                lines.append(f"{node}: slurmd -C says RealMemory={f['real_memory_mib']} MiB, below slurm.conf's "
                             f"RealMemory={g.real_memory}: slurmctld drains the node (Low RealMemory; pool {g.pool})")
            gpus = f.get("gpus") or []
            if g.gpus and len(gpus) != g.gpus:
                lines.append(f"{node}: {len(gpus)} GPUs, the model has {g.gpus} (pool {g.pool})")
            if g.gpu_type and g.gres_typed:
                other = sorted({x["name"] for x in gpus if _squash(g.gpu_type) not in _squash(x["name"])})
                if other:
                    lines.append(f"{node}: GPUs {', '.join(other)}, the model has {g.gpu_type} (pool {g.pool})")
            have = {(n["device"], n["port"]): n for n in f.get("nics") or []}
            for rail in hw.rails or ():
                n = have.get((rail.device, rail.port))
                what = f"{rail.role} rail {rail.hca}"
                if n is None:
                    lines.append(f"{node}: {what} missing (pool {g.pool})")
                    continue
                if rail.role != "compute" and not rail.declared:
                    continue  # a platform's storage / in-band port: there is all it owes (platforms.Nic.declared)
                if n["state"] != "ACTIVE" or n["phys_state"] != "LinkUp":
                    lines.append(f"{node}: {what} is {n['state'] or '?'}/{n['phys_state'] or '?'}, not ACTIVE/LinkUp")
                elif n["rate_gbps"] != rail.rate_gbps:
                    lines.append(f"{node}: {what} at {n['rate_gbps']} Gb/s, the model has {rail.rate_gbps}")
                if rail.netdev and n["netdev"] and rail.netdev != n["netdev"]:
                    lines.append(f"{node}: {what} is netdev {n['netdev']}, the model has {rail.netdev}")
            lines += _topo_drift(node, g, f)
            if hw.rails:
                known = {(r.device, r.port) for r in hw.rails}
                for key in sorted(set(have) - known):
                    lines.append(f"{node}: RDMA port {key[0]}:{key[1]} is not in the model (pool {g.pool}: nics)")
            if g.nvlink_domain_nodes > 1 and gpus:
                fab = [x.get("fabric") or {} for x in gpus]
                bad = [x for x, fb in zip(gpus, fab) if fb.get("state") != "Completed" or fb.get("status") != "Success"]
                if bad:
                    lines.append(f"{node}: NVLink fabric not registered on GPU "
                                 + ", ".join(f"{x['index']} ({(x.get('fabric') or {}).get('state') or 'none'})" for x in bad))
                ids = {(fb.get("cluster_uuid"), fb.get("clique_id")) for fb in fab if fb.get("state") == "Completed"}
                if len(ids) == 1 and node in domain_of:
                    cliques.setdefault(domain_of[node], {})[node] = "/".join(str(i) for i in next(iter(ids)))
                elif len(ids) > 1:
                    lines.append(f"{node}: its GPUs are in {len(ids)} NVLink cliques")
    for domain, by_node in sorted(cliques.items()):
        seen: dict[str, list[str]] = {}
        for node, clique in by_node.items():
            seen.setdefault(clique, []).append(node)
        if len(seen) > 1:
            main = max(seen.values(), key=len)
            for clique, nodes in sorted(seen.items()):
                if nodes is not main:
                    lines.append(f"{', '.join(sorted(nodes))}: NVLink clique {clique}, not the one of the rest of "
                                 f"domain {domain} ({len(main)} nodes)")
    return lines


def _topo_drift(node: str, g, f: dict[str, Any]) -> list[str]:
    """What `nvidia-smi topo -m` shows against the model: each GPU's socket (gres.conf Cores= was written from
    it) and each rail's NIC beside the GPU the model pairs it with (NCCL's rail, NCCL_IB_HCA, one network per
    rail), PIX or PXB for GPUDirect RDMA."""
    topo = f.get("topo") or {}
    rows = {r["index"]: r for r in topo.get("gpus") or [] if isinstance(r, dict)}
    if not rows:
        return []
    hw, out = g.hw, []
    numa_sockets = f.get("numa_sockets") or {}
    off = []
    for i, want in enumerate(hw.gpu_sockets or ()):
        numa = (rows.get(i) or {}).get("numa")
        if numa is None or numa not in numa_sockets:
            # a NUMA node the host's map does not place has no known socket: not guessed from its number (one
            # socket may hold several NUMA nodes: Intel SNC, AMD NPS2/NPS4), as spec/facts.py does not
            continue
        sock = numa_sockets[numa]
        if sock != want:
            off.append(f"GPU {i} on socket {sock} (NUMA node {numa}), not {want}")
    if off:
        out.append(f"{node}: nvidia-smi topo -m puts " + "; ".join(off)
                   + f": gres.conf's Cores= bind those GPUs to the other socket's cores (pool {g.pool})")
    for rail in hw.rails or ():
        if rail.gpu is None or rail.gpu not in rows or not topo.get("named"):
            continue
        link = rows[rail.gpu]["nics"].get(rail.device)
        what = f"{rail.role} rail {rail.hca}"
        if link is None:
            out.append(f"{node}: {what} is not in nvidia-smi topo -m (pool {g.pool})")
        elif link not in NEAR:
            beside = [str(r["index"]) for r in rows.values() if r["nics"].get(rail.device) in NEAR]
            out.append(f"{node}: {what} is {link} to GPU {rail.gpu}, not PIX/PXB"
                       + (f"; it sits beside GPU {', '.join(beside)}" if beside else "")
                       + f" (nvidia-smi topo -m): the model pairs it with GPU {rail.gpu} (pool {g.pool})")
    return out


def facts_document(name: str, facts: dict[str, dict[str, Any]], lines: list[str]) -> dict[str, Any]:
    return {"apiVersion": "orchgen/v1alpha1", "kind": "Facts", "metadata": {"name": name},
            "hosts": {h: facts[h] for h in sorted(facts)}, "drift": lines}
