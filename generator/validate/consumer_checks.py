"""What slurmctld, the API server, kustomize and a shell would refuse or regret in a bundle that the
other checks let through (issue 19: `validate` said ok on these damaged bundles):

- a node defined on two NodeName lines (slurmctld: "Duplicated NodeHostName"/duplicate node: fatal);
- a NodeName line whose CPUs= is not what its Boards x SocketsPerBoard x CoresPerSocket x
  ThreadsPerCore give (slurmd registers its real count, slurmctld drains the node as "Low
  socket*core*thread count"), or a CoreSpecCount that leaves no core;
- cgroup.conf without ConstrainDevices=yes while nodes have GPUs: every job sees every GPU of its node;
- an orchgen bundle (its marker file) without plan.json;
- a Kueue ClusterQueue's GPU nominalQuota, or a Volcano Queue's GPU capability or deserved share, beyond
  every GPU the plan has;
- a Helm release whose chart version is not a version (shell or YAML syntax in it), or is neither
  the one the catalog pins nor the one plan.json records (an options.versions override);
- a namespaced object in a namespace nothing creates: no Namespace object in the bundle, no Helm
  release installs into it, no platform component owns it (the API server: namespaces "x" not found);
- a kustomization entry that leads outside the bundle;
- a shell script orchgen writes with lines orchgen does not write (hand-edited: `curl ... | bash`
  appended), or that `bash -n` (and shellcheck, where installed, at severity error) refuses.
"""
from __future__ import annotations

import functools
import json
import os
import posixpath
import re
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

from .. import catalog
from ..bundle import MARKER
from .bundle_view import Bundle, Doc, Finding, as_list, error
from .slurm_conf import parse_lines

CONF, CGROUP = "slurm/slurm.conf", "slurm/cgroup.conf"
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")


def check(bundle: Bundle, objs: list[Doc]) -> Iterator[Finding]:
    yield from _plan_json(bundle)
    yield from _node_lines(bundle)
    yield from _cgroup(bundle)
    yield from _quotas(bundle, objs)
    yield from _chart_versions(bundle)
    yield from _namespaces(bundle, objs)
    yield from _kustomize_paths(bundle)
    yield from _scripts(bundle)


def _plan_json(bundle: Bundle) -> Iterator[Finding]:
    if (bundle.root / MARKER).is_file() and not bundle.has("plan.json"):
        yield error("plan.json", 0, "is missing: orchgen writes it into every bundle, and the checks that "
                    "compare the bundle with its plan (GPUs, pools, versions) could not run; re-run orchgen plan")


# ---------------------------------------------------------------- slurm.conf, cgroup.conf


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.isascii() and value.isdigit() and len(value) < 10 else None


def _node_lines(bundle: Bundle) -> Iterator[Finding]:
    text = bundle.text(CONF)
    if text is None:
        return
    from ..spec import hostlist

    first: dict[str, int] = {}
    default: dict[str, str] = {}
    for ln in parse_lines(CONF, text, []):
        if next(iter(ln.params)) != "nodename":
            continue
        if ln.params["nodename"].upper() == "DEFAULT":
            default = {k: v for k, v in ln.params.items() if k != "nodename"}
            continue
        try:
            names = hostlist.expand(ln.params["nodename"])
        except hostlist.HostlistError:
            continue  # slurm_checks reports it
        again = sorted({n for n in names if n in first}, key=names.index)
        if again:
            yield error(CONF, ln.line, f"node {again[0]} is already defined on line {first[again[0]]}"
                        + (f" ({len(again)} nodes defined twice)" if len(again) > 1 else "")
                        + ": slurmctld refuses a node on two NodeName lines")
        for n in names:
            first.setdefault(n, ln.line)
        p = {**default, **ln.params}
        boards = _int(p.get("boards")) or 1
        sockets = _int(p.get("socketsperboard"))
        sockets = boards * sockets if sockets else _int(p.get("sockets"))
        cores, threads, cpus = _int(p.get("corespersocket")), _int(p.get("threadspercore")), _int(p.get("cpus"))
        if p.get("cpus") is not None and cpus is None:
            yield error(CONF, ln.line, "CPUs= is not a whole number")
        if sockets and cores and threads:
            total = sockets * cores * threads
            if cpus is not None and cpus not in (total, sockets * cores):
                yield error(CONF, ln.line, f"CPUs={cpus}, but the node's sockets x cores x threads are {total}: "
                            "slurmd registers the hardware it has, and slurmctld drains a node that has "
                            "less than its NodeName line says (Low socket*core*thread count)")
            spec = _int(p.get("corespeccount"))
            if spec is not None and spec >= sockets * cores:
                yield error(CONF, ln.line, f"CoreSpecCount={spec} reserves every one of the node's "
                            f"{sockets * cores} cores: no job could run")


def _cgroup(bundle: Bundle) -> Iterator[Finding]:
    conf_text = bundle.text(CONF)
    if conf_text is None or not re.search(r"(?im)^\s*NodeName=\S+.*\bGres=\S*gpu", conf_text):
        return
    text = bundle.text(CGROUP)
    if text is None:
        if bundle.has(CONF) and re.search(r"(?im)^\s*TaskPlugin=\S*task/cgroup", conf_text):
            yield error(CGROUP, 0, "is missing, and the nodes have GPUs: without ConstrainDevices=yes "
                        "every job sees every GPU of its node")
        return
    lines = parse_lines(CGROUP, text, [])
    value, line = None, 0
    for ln in lines:
        if "constraindevices" in ln.params:
            value, line = ln.params["constraindevices"], ln.line
    if value is None or value.lower() != "yes":
        where = f"ConstrainDevices={value}" if value is not None else "no ConstrainDevices=yes"
        yield error(CGROUP, line, f"{where}, and the nodes have GPUs: every job would see every GPU of its "
                    "node (cgroup.conf(5): ConstrainDevices confines a job to the GRES it was given)")


# ---------------------------------------------------------------- Kubernetes objects


def _plan_gpus(bundle: Bundle) -> int | None:
    planes = bundle.plan.get("planes")
    if not isinstance(planes, dict):
        return None
    total = 0
    for plane in planes.values():
        gpus = plane.get("gpus") if isinstance(plane, dict) else None
        if not isinstance(gpus, int) or isinstance(gpus, bool):
            return None
        total += gpus
    return total


def _quantity(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and re.fullmatch(r"\d{1,15}", value):
        return float(value)
    return None


def _quotas(bundle: Bundle, objs: list[Doc]) -> Iterator[Finding]:
    capacity = _plan_gpus(bundle)
    if capacity is None:
        return
    for doc in objs:
        if doc.kind == "Queue" and doc.api_version.startswith("scheduling.volcano.sh/"):
            yield from _volcano_quota(doc, capacity)
        if doc.kind != "ClusterQueue" or not doc.api_version.startswith("kueue.x-k8s.io/"):
            continue
        spec = doc.data.get("spec") if isinstance(doc.data.get("spec"), dict) else {}
        for g, group in enumerate(as_list(spec.get("resourceGroups"))):
            for f, flavor in enumerate(as_list(group.get("flavors") if isinstance(group, dict) else None)):
                for r, res in enumerate(as_list(flavor.get("resources") if isinstance(flavor, dict) else None)):
                    if not isinstance(res, dict) or res.get("name") not in GPU_RESOURCES:
                        continue
                    quota = _quantity(res.get("nominalQuota"))
                    if quota is not None and quota > capacity:
                        at = ["spec", "resourceGroups", g, "flavors", f, "resources", r, "nominalQuota"]
                        yield error(doc.path, doc.line_of(at),
                                    f"{doc.label}: nominalQuota {int(quota)} {res['name']} is more than the "
                                    f"{capacity} GPUs of the whole plan (plan.json): Kueue would admit "
                                    "workloads that can never be scheduled")


def _volcano_quota(doc: Doc, capacity: int) -> Iterator[Finding]:
    spec = doc.data.get("spec") if isinstance(doc.data.get("spec"), dict) else {}
    for key in ("capability", "deserved"):
        resources = spec.get(key)
        for name in GPU_RESOURCES:
            quota = _quantity(resources.get(name)) if isinstance(resources, dict) else None
            if quota is not None and quota > capacity:
                yield error(doc.path, doc.line_of(["spec", key, name]),
                            f"{doc.label}: {key} {int(quota)} {name} is more than the {capacity} GPUs of the "
                            "whole plan (plan.json)")


_CHART_VERSION = re.compile(r"^v?\d{1,9}\.\d{1,9}(\.\d{1,9})?(-[0-9A-Za-z.-]{1,64})?(\+[0-9A-Za-z.-]{1,64})?$")


def _chart_versions(bundle: Bundle) -> Iterator[Finding]:
    path = "kubernetes/helm/releases.yaml"
    doc = bundle.doc(path)
    if doc is None or not isinstance(doc.data, dict):
        return
    planned = bundle.plan.get("versions", {}).get("charts", {}) if isinstance(bundle.plan.get("versions"), dict) \
        else {}
    planned = planned if isinstance(planned, dict) else {}
    for i, rel in enumerate(as_list(doc.data.get("releases"))):
        if not isinstance(rel, dict) or "version" not in rel:
            continue
        name, version = str(rel.get("name", "")), rel.get("version")
        line = doc.line_of(["releases", i, "version"])
        if not isinstance(version, str) or not _CHART_VERSION.fullmatch(version):
            yield error(path, line, f"release {name}: the chart version is not a SemVer version (such as 1.2.3 "
                        "or v1.2.3): helm refuses it, and it is written into shell lines")
            continue
        known = catalog.known_versions(name)
        if known and version not in known and planned.get(name) != version:
            yield error(path, line, f"release {name}: chart version {version} is neither the catalog's "
                        f"({', '.join(sorted(known))}) nor the one plan.json records: hand-edited?")


def _created_namespaces(bundle: Bundle, objs: list[Doc]) -> set[str]:
    made = {d.name for d in objs if d.kind == "Namespace" and d.api_version == "v1"}
    made |= set(catalog.PLATFORM_NAMESPACES)
    releases = bundle.doc("kubernetes/helm/releases.yaml")
    if releases is not None and isinstance(releases.data, dict):  # `helm install --create-namespace`
        made |= {str(r["namespace"]) for r in as_list(releases.data.get("releases"))
                 if isinstance(r, dict) and r.get("namespace")}
    for d in objs:  # GitOps: a HelmRelease's targetNamespace, an Application's destination
        spec = d.data.get("spec") if isinstance(d.data.get("spec"), dict) else {}
        for ns in (spec.get("targetNamespace"), (spec.get("destination") or {}).get("namespace")
                   if isinstance(spec.get("destination"), dict) else None):
            if isinstance(ns, str):
                made.add(ns)
    return made


def _namespaces(bundle: Bundle, objs: list[Doc]) -> Iterator[Finding]:
    if not objs:
        return
    made = _created_namespaces(bundle, objs)
    for doc in objs:
        ns = doc.namespace
        if ns is None or ns in made or ns.startswith(catalog.PLATFORM_NAMESPACE_PREFIXES):
            continue
        yield error(doc.path, doc.line_of(["metadata", "namespace"]),
                    f"{doc.label} is in namespace {ns}, which nothing in the bundle creates (no Namespace "
                    "object, no release installs into it): the API server refuses it (namespace not found)")


def _kustomize_paths(bundle: Bundle) -> Iterator[Finding]:
    for path in bundle.files:
        if posixpath.basename(path) not in ("kustomization.yaml", "kustomization.yml", "Kustomization"):
            continue
        doc = bundle.doc(path)
        if doc is None or not isinstance(doc.data, dict):
            continue
        base = posixpath.dirname(path)
        for key in ("resources", "components", "bases", "crds"):
            for i, entry in enumerate(as_list(doc.data.get(key))):
                if not isinstance(entry, str) or "://" in entry or entry.startswith(("github.com/", "git@")):
                    continue
                target = posixpath.normpath(posixpath.join(base, entry))
                if entry.startswith("/") or target == ".." or target.startswith("../"):
                    yield error(path, doc.line_of([key, i]), f"{key} entry {entry} leads outside the bundle: "
                                "kustomize would build files the bundle does not hold")


# ---------------------------------------------------------------- shell scripts

# A word orchgen writes into a script's variable parts: names, numbers, label pairs, quoted words.
# Nothing that runs anything: no ; & | ` $( ) < > and no unquoted spaces inside.
_WORD = r"(?:'[^'\n]*'|[A-Za-z0-9_./=:,@+%!\[\]^-])+"
_NODE_LABELS_BODY = re.compile(rf"^(?:label|taint|annotate|expect_nodes|assign_plane)(?: {_WORD})+$")


@functools.lru_cache(maxsize=None)
def _jinja_skeleton(name: str) -> tuple[frozenset[str], tuple[re.Pattern[str], ...]]:
    """The lines a template can produce: its static lines, and a pattern for each line with values."""
    from importlib import resources

    text = resources.files("generator.templates").joinpath(name).read_text(encoding="utf-8")
    statics, patterns = set(), []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or re.fullmatch(r"(\{%.*?%\}|\{#.*?#\}|\s)*", line):
            continue
        if "{{" not in line and "{%" not in line:
            statics.add(line)
            continue
        rx = ""
        for part in re.split(r"(\{%\s*if\b.*?%\}.*?\{%\s*endif\s*%\}|\{\{.*?\}\}|\{%.*?%\})", line):
            if not part:
                continue
            if part.startswith("{{"):
                rx += _WORD
            elif re.match(r"\{%\s*if\b", part):
                inner = re.sub(r"^\{%.*?%\}|\{%\s*endif\s*%\}$", "", part)
                rx += "(?:" + "".join(_WORD if p.startswith("{{") else re.escape(p)
                                      for p in re.split(r"(\{\{.*?\}\})", inner) if p) + ")?"
            elif part.startswith("{%"):
                continue
            else:
                rx += re.escape(part)
        patterns.append(re.compile(rf"^{rx}$"))
    return frozenset(statics), tuple(patterns)


@functools.lru_cache(maxsize=None)
def _node_labels_skeleton() -> frozenset[str]:
    from .. import labels_script as labels

    statics = set()
    for block in (labels.HEADER, labels.CLOUD_HEADER, labels.UNTAINT, labels.FOOTER):
        for raw in block.splitlines():
            line = raw.strip()
            if line and not line.startswith("#") and not re.search(r"(?<!\{)\{[a-z_]+\}(?!\})", line):
                statics.add(line.replace("{{", "{").replace("}}", "}"))
    return frozenset(statics)


def _formatted_lines() -> tuple[re.Pattern[str], ...]:
    """node-labels.sh's header lines with a value (PLANE=..., the untaint lines with the taint key)."""
    from .. import labels_script as labels

    out = []
    for block in (labels.HEADER, labels.CLOUD_HEADER, labels.UNTAINT, labels.FOOTER):
        for raw in block.splitlines():
            line = raw.strip()
            if line and not line.startswith("#") and re.search(r"(?<!\{)\{[a-z_]+\}(?!\})", line):
                parts = re.split(r"((?<!\{)\{[a-z_]+\}(?!\}))", line)
                out.append(re.compile("^" + "".join(
                    _WORD if re.fullmatch(r"\{[a-z_]+\}", p) else re.escape(p.replace("{{", "{").replace("}}", "}"))
                    for p in parts) + "$"))
    return tuple(out)


SCRIPTS = {
    "slurm/accounts.sh": "slurm/accounts.sh.j2",
    "slurm/gpu-health.sh": "slurm/gpu-health.sh.j2",
    "slurm/task-prolog.sh": "slurm/task-prolog.sh.j2",
}


def _foreign_line(path: str, text: str) -> tuple[int, str] | None:
    """The first line of `text` that orchgen does not write into `path` (comments and blank lines aside)."""
    if path == "kubernetes/node-labels.sh":
        statics, patterns = _node_labels_skeleton(), (_NODE_LABELS_BODY, *_formatted_lines())
    elif path in SCRIPTS:
        statics, patterns = _jinja_skeleton(SCRIPTS[path])
    elif re.fullmatch(r"slurm/ray-[a-z0-9-]+\.sbatch", path):
        statics, patterns = _jinja_skeleton("slurm/ray.sbatch.j2")
    else:
        return None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or (line.startswith("#") and number > 1) or line in statics:
            continue
        if line.startswith("#!") and number == 1 and line in ("#!/bin/sh", "#!/usr/bin/env bash", "#!/bin/bash"):
            continue
        if any(p.fullmatch(line) for p in patterns):
            continue
        return number, line
    return None


def _script_texts(bundle: Bundle) -> list[tuple[str, str]]:
    scripts = []
    for path in bundle.files:
        if not path.endswith((".sh", ".sbatch")):
            continue
        text = bundle.text(path)
        if text is not None:
            scripts.append((path, text))
    return scripts


def start_scripts(bundle: Bundle) -> None:
    """Start bash -n and shellcheck of every script now, in threads (each is a process that mostly waits
    to start; run one after another they were most of validate's wall time), so that they run beside
    the checks in Python (issue 41); _scripts takes their findings, in the scripts' order."""
    from concurrent.futures import ThreadPoolExecutor

    if "shell-syntax" in bundle.memo:
        return
    scripts = _script_texts(bundle)
    tools = _tools()
    pool = ThreadPoolExecutor(max_workers=max(1, min(8, len(scripts))))
    futures = [pool.submit(lambda script: list(_shell_syntax(bundle, *script, tools)), script) for script in scripts]
    pool.shutdown(wait=False)  # the threads finish their work; no new work comes
    bundle.memo["shell-syntax"] = (scripts, futures)


def _scripts(bundle: Bundle) -> Iterator[Finding]:
    start_scripts(bundle)
    scripts, futures = bundle.memo["shell-syntax"]
    for (path, text), future in zip(scripts, futures):
        foreign = _foreign_line(path, text)
        if foreign:
            yield error(path, foreign[0], "a line orchgen does not write: the script was edited by hand "
                        "(re-run orchgen plan, or move site additions to a script of your own)")
        yield from future.result()


def _shell_syntax(bundle: Bundle, path: str, text: str, tools: str = "") -> Iterator[Finding]:
    """bash -n's and shellcheck's findings of one script. Kept by the script's text and the two tools'
    files (validate.parsed, `tools` from _tools): the same text checked by the same binaries gives the
    same findings, and shellcheck's analysis of a 16,384-GPU bundle's scripts was ~0.4 s of CPU, a
    quarter of `validate`'s (issue 41). A run cut short (a timeout, a tool that cannot start, output
    that does not decode) is not kept."""
    from .parsed import code_digest, derived

    shell = "sh" if text.startswith("#!/bin/sh") else "bash"
    try:
        found = derived(text, f"shell-syntax:{shell}:{tools or _tools()}:{code_digest(__file__)}",
                        lambda: _shell_findings(text, shell))
    except _CutShort as exc:
        found = exc.found
    for line, message in found:
        yield error(path, int(line), str(message))


class _CutShort(Exception):
    def __init__(self, found: list[list]) -> None:
        super().__init__()
        self.found = found


def _tools() -> str:
    """Which bash and shellcheck run (path, size, modification time): a new binary, new findings."""
    out = []
    for tool in ("bash", "shellcheck"):
        where = shutil.which(tool)
        try:
            st = os.stat(where) if where else None
        except OSError:
            st = None
        out.append(f"{where}:{st.st_size}:{st.st_mtime_ns}" if st else f"{where}:-")
    return ",".join(out)


def _shell_findings(text: str, shell: str) -> list[list]:
    """[line, message] (as JSON keeps them) of bash -n, then (when bash -n passes) shellcheck at severity error; _CutShort
    when a tool could not give its verdict."""
    try:
        proc = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True,
                              errors="replace", timeout=20)  # a stranger's bytes come back in the messages
    except (OSError, subprocess.TimeoutExpired):
        raise _CutShort([]) from None
    if proc.returncode != 0:
        m = re.search(r"line (\d+): (.*)", proc.stderr)
        return [[int(m.group(1)) if m else 0,
                 f"bash -n: {m.group(2).strip() if m else 'syntax error'}: the script would not run"]]
    if shutil.which("shellcheck") is None:
        return []
    try:
        proc = subprocess.run(["shellcheck", "-s", shell, "-S", "error", "-f", "json", "-"], input=text,
                              capture_output=True, text=True, errors="replace", timeout=60)
        comments = json.loads(proc.stdout or "[]")
    except (OSError, subprocess.TimeoutExpired, ValueError):
        raise _CutShort([]) from None
    return [[int(c.get("line", 0)), f"shellcheck SC{c.get('code')}: {c.get('message', '')}"]
            for c in (comments[:5] if isinstance(comments, list) else []) if isinstance(c, dict)]
