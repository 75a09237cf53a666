"""workload.yaml's `site:` (spec/site.py) emitted in place in the files orchgen wrote (issue 22).

Each entry goes where the site had it and says why it is there:

* a file key orchgen also writes (`SlurmdTimeout`, `SelectTypeParameters` ...): orchgen's line takes the
  site's value, with a comment above it; Slurm keeps one value per key ("specified more than once,
  latest value used"), so the value must replace orchgen's, not follow it;
* any other file key: added, with its comment, before the first NodeName line;
* a pool's key (`pool:`): set on that pool's NodeName line(s), replacing orchgen's value of that key;
* a whole record (`lines`): added at the end, with its comment. The site's PartitionName lines replace
  orchgen's own partitions (the site defines its partitions; orchgen's per-pool ones are only the
  default), and the site's gres.conf GPU lines replace orchgen's for the nodes they name (all nodes for
  a line without NodeName=), since Slurm would count a GPU described twice twice.

The files are read back with the one Slurm lexer (generator/spec/slurmconf.py) to find the records.
"""
from __future__ import annotations

from ...errors import OrchgenError
from ...spec import hostlist, slurmconf
from ...spec.site import Site, SiteFile, slurm_value

# slurm.conf keys given once per line, several lines in order (slurm.conf(5): "SlurmctldHost ... may be specified
# multiple times, the first entry will run the primary slurmctld")
_LIST_KEYS = ("slurmctldhost",)
HEADER = "# --- carried from the site (workload.yaml site:): not modelled by orchgen, kept as the site wrote it ---"


def apply(site: Site | None, files: dict[str, str], pool_hosts: dict[str, set[str]]) -> dict[str, str]:
    """`files` ({name: text}) with the site's entries emitted in place, and the site's own files added."""
    if site is None:
        return files
    out = dict(files)
    for name in ("slurm.conf", "gres.conf", "cgroup.conf"):
        entries = site.of(name)
        if entries is not None and name in out:
            out[name] = _emit(name, out[name], entries, pool_hosts)
    if site.plugstack_conf is not None and site.plugstack_conf.lines:
        # the site's SPANK plugins beside orchgen's: Slurm reads plugstack.conf from slurm.conf's folder when
        # slurm.conf sets no PlugStackConfig (slurm.conf(5)), and loads every line's plugin (spank(8))
        text = out.get("plugstack.conf") or (
            "# plugstack.conf: the SPANK plugins srun, salloc, sbatch and slurmd load (spank(8)); beside slurm.conf,\n"
            "# where Slurm reads it when slurm.conf sets no PlugStackConfig (slurm.conf(5)).\n")
        lines = [HEADER] + [x for e in site.plugstack_conf.lines for x in (_why(e), e.line)]
        out["plugstack.conf"] = text.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"
    for name, text in sorted(site.files.items()):
        if name in out or any(other.startswith(name + "/") for other in out):  # spec/site.py refuses these first
            raise OrchgenError(f"{name} is a file orchgen writes itself; give the site's file another name",
                               field=f"site.files.{name}")
        out[name] = text
    return out


def _why(entry) -> str:
    where = f" (from {entry.source})" if entry.source else ""
    return f"# site{where}: {entry.reason}"


def _hosts(expr: str) -> set[str]:
    try:
        return set(hostlist.expand(expr))
    except ValueError:
        return set()


def _emit(name: str, text: str, entries: SiteFile, pool_hosts: dict[str, set[str]]) -> str:
    lines = text.splitlines()
    records = slurmconf.parse(text, name)
    replace: dict[int, list[str]] = {}  # index of a record's first line -> what stands there instead
    drop: set[int] = set()  # indexes of physical lines removed (continuations of a replaced record)

    def put(record: slurmconf.Record, new: list[str]) -> None:
        first = record.line - 1
        replace[first] = new
        drop.update(range(first + 1, first + record.lines))

    added: list[str] = []
    node_keys: dict[int, list] = {}
    # keys Slurm reads once per line, in order (SlurmctldHost: the first is the primary): the site's lines,
    # all of them, stand where orchgen's first one was, and orchgen's others go
    for key in _LIST_KEYS:
        site_lines = [e for e in entries.keys if e.pool is None and e.key.lower() == key]
        if not site_lines:
            continue
        mine = [r for r in records if r.kind == key and len(r.pairs) == 1]
        new = [x for e in site_lines for x in (_why(e), f"{e.key}={slurm_value(e.value)}")]
        if mine:
            put(mine[0], new)
            for record in mine[1:]:
                put(record, [])
        else:
            added += new
    for entry in entries.keys:
        if entry.pool is None and entry.key.lower() in _LIST_KEYS:
            continue
        if entry.pool is not None:
            hosts = pool_hosts.get(entry.pool, set())
            for record in records:
                if record.kind == "nodename" and hosts and _hosts(record.pairs[0].value) <= hosts:
                    node_keys.setdefault(record.line, []).append(entry)
            continue
        mine = [r for r in records if r.kind == entry.key.lower() and len(r.pairs) == 1]
        if mine:
            put(mine[-1], [_why(entry), f"{entry.key}={slurm_value(entry.value)}"])
        else:
            added += [_why(entry), f"{entry.key}={slurm_value(entry.value)}"]
    for record in records:
        for entry in node_keys.get(record.line, ()):
            pairs = [p for p in record.pairs]
            at = next((i for i, p in enumerate(pairs) if p.key.lower() == entry.key.lower()), None)
            new = slurmconf.Pair(entry.key, entry.value)
            if at is None:
                pairs.append(new)
            else:
                pairs[at] = new
            record = slurmconf.Record(record.file, record.line, record.lines, record.text, tuple(pairs))
        if record.line in node_keys:
            comments = [_why(e).replace("# site", f"# site {e.key}", 1) for e in node_keys[record.line]]
            put(record, comments + [" ".join(f"{p.key}{p.op}={slurm_value(p.value)}" for p in record.pairs)])

    site_kinds = {slurmconf.parse(entry.line)[0].kind for entry in entries.lines if slurmconf.parse(entry.line)}
    if name == "slurm.conf" and "partitionname" in site_kinds:
        for record in records:
            if record.kind == "partitionname" and record.pairs[0].value.upper() != "DEFAULT":
                put(record, [f"# orchgen's partition {record.pairs[0].value} is not written: the site defines "
                             "its own partitions (site.slurm_conf.lines)"])
    if name == "gres.conf":
        _drop_gres(records, entries, put)

    out: list[str] = []
    first_node = next((r.line - 1 for r in records if r.kind == "nodename"), None) if name == "slurm.conf" else None
    for i, line in enumerate(lines):
        if i == first_node and added:
            out += [HEADER, *added, ""]
            added = []
        if i in drop:
            continue
        out += replace.get(i, [line])
    if added:
        out += ["", HEADER, *added]
    if entries.lines:
        out += ["", HEADER]
        for entry in entries.lines:
            out += [_why(entry), entry.line]
    return "\n".join(out) + "\n"


def _drop_gres(records: list[slurmconf.Record], entries: SiteFile, put) -> None:
    """orchgen's GPU lines for the nodes the site's own GPU lines describe (every node: a line without
    NodeName=); the site's AutoDetect key, if any, is a key of the file and replaces orchgen's."""
    covered: set[str] = set()
    everything = False
    for entry in entries.lines:
        parsed = slurmconf.parse(entry.line)
        if not parsed or parsed[0].get("Name") is None:
            continue
        nodes = parsed[0].get("NodeName")
        if nodes is None:
            everything = True
        else:
            covered |= _hosts(nodes)
    for record in records:
        if record.get("Name") is None and record.get("AutoDetect") is None:
            continue
        nodes = record.get("NodeName")
        if everything or (nodes is not None and _hosts(nodes) & covered):
            put(record, ["# orchgen's line for these GPUs is not written: the site describes them (below)"])
