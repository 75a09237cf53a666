"""Both planes' impact of a re-plan, for `orchgen plan --diff` (the bundle in memory against the one
on disk) and `orchgen validate NEW --against OLD` (two bundles on disk)."""
from __future__ import annotations

import difflib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from generator.errors import printable_text

from .kube import DISRUPTIVE, KubeChange, kube_impact
from .slurm import ACTIONS, HOW, PACKAGES, SlurmChange, impact_of_files, packages_of_vars

# Slurm actions that disrupt the running site: a daemon restart or more
SLURM_DISRUPTIVE = set(ACTIONS[ACTIONS.index("restart_slurmctld"):])


@dataclass
class FileDiff:
    path: str
    status: str  # changed | added | removed
    diff: str  # unified diff ("" for a file that is not text, or was not read)
    note: str = ""  # why the file on disk was not read (a link leading out of the folder, a FIFO ...)


@dataclass(frozen=True)
class NotRead:
    """A bundle file on disk orchgen did not read, and why (never its content)."""

    reason: str


@dataclass(frozen=True)
class NodeMove:
    """Nodes the new plan puts on another plane than the bundle being replaced did (plan.json's planes):
    always disruptive, the plane they leave drains them before the one they join takes them (issue 36)."""

    nodes: str  # a Slurm hostlist
    old: str  # the plane they leave
    new: str  # the plane they join

    def steps(self) -> list[str]:
        return _leave(self.old, self.nodes, self.new) + _join(self.new, self.nodes)


# What each plane does with a node that leaves it, and one that joins it: Slurm's from scontrol(1)
# ("update NodeName=... State=DRAIN Reason=..."; RESUME once slurmd registers), Kubernetes' from
# kubernetes.io/docs/tasks/administer-cluster/safely-drain-node (cordon, then drain: evictions that
# respect PodDisruptionBudgets; --ignore-daemonsets, --delete-emptydir-data).
def _leave(plane: str, nodes: str, to: str) -> list[str]:
    if plane == "slurm":
        return [f'slurm: scontrol update NodeName={nodes} State=DRAIN Reason="orchgen: moves to {to}"; '
                f"wait until `sinfo -h -n {nodes} -o %T` says drained (running jobs finish; none starts), "
                "then stop slurmd there before the new slurm.conf (without them) is applied"]
    return [f"{plane}: kubectl cordon {_kube_names(nodes)}; kubectl drain {_kube_names(nodes)} --ignore-daemonsets "
            "--delete-emptydir-data (evicts their pods, PodDisruptionBudgets respected: a service moves "
            f"to its other replicas first); then remove them from the cluster (kubectl delete node) before {to} "
            "takes them"]


def _join(plane: str, nodes: str) -> list[str]:
    if plane == "slurm":
        return [f"slurm: bring them up with bringup/site.yml --limit '{nodes}' and the new slurm.conf (which "
                f"names them), then scontrol update NodeName={nodes} State=RESUME once slurmd registers"]
    return [f"{plane}: join them to the cluster, label them (bash kubernetes/node-labels.sh), then "
            f"kubectl uncordon {_kube_names(nodes)}"]


def _kube_names(nodes: str) -> str:
    from generator.spec import hostlist

    try:
        names = hostlist.expand(nodes)
    except Exception:  # noqa: BLE001
        return nodes
    return " ".join(names) if len(names) <= 8 else f"<each of {nodes}>"


def node_moves(old_plan: str | None, new_plan: str | None) -> list[NodeMove]:
    """The nodes on both plan.json's planes that changed plane, grouped by (from, to)."""
    from generator.spec.planes import planes_of_document
    from generator.spec import hostlist

    def planes(text: str | None) -> dict[str, str]:
        try:
            return planes_of_document(json.loads(text)) if text else {}
        except ValueError:
            return {}

    before, after = planes(old_plan), planes(new_plan)
    groups: dict[tuple[str, str], list[str]] = {}
    for node, plane in before.items():
        if after.get(node, plane) != plane:
            groups.setdefault((plane, after[node]), []).append(node)
    return [NodeMove(hostlist.compress(sorted(nodes)), old, new) for (old, new), nodes in sorted(groups.items())]


@dataclass
class Impact:
    release: str
    files: list[FileDiff] = field(default_factory=list)
    slurm: list[SlurmChange] = field(default_factory=list)
    kubernetes: list[KubeChange] = field(default_factory=list)
    moves: list[NodeMove] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.files)

    def disruptive(self) -> list[str]:
        slurm = sorted((c for c in self.slurm if c.action in SLURM_DISRUPTIVE),
                       key=lambda c: (-ACTIONS.index(c.action), c.file, c.key))
        return ([f"move: {m.nodes} from {m.old} to {m.new} (drain on {m.old} first: steps below)" for m in self.moves]
                + [f"slurm {c.action}: {c.file} {c.key}{_nodes(c)}" for c in slurm]
                + [f"kubernetes {c.action}: {c.object}: {c.detail}" for c in self.kubernetes if c.action in DISRUPTIVE])

    def impact_lines(self) -> list[str]:
        out = []
        if self.moves:
            out.append("Nodes moving between planes (each plane's steps, in order):")
            for m in self.moves:
                out.append(f"  {m.nodes}: {m.old} -> {m.new}")
                out += [f"    {i}. {step}" for i, step in enumerate(m.steps(), 1)]
        if self.slurm:
            out.append(f"Slurm {self.release} (generator/impact/slurm.py):")
            for c in sorted(self.slurm, key=lambda c: (-ACTIONS.index(c.action), c.file, c.key)):
                change = f": {_short(c.old)} -> {_short(c.new)}" if (c.old or c.new) else ""
                out.append(f"  {c.action}: {c.file} {c.key}{change}{_nodes(c)}")
                out.append(f"      why: {c.reason}" + (f" [{c.cite}]" if c.cite else ""))
            out.append("  how:")
            for action in sorted({c.action for c in self.slurm}, key=ACTIONS.index, reverse=True):
                out.append(f"    {action}: {HOW[action]}")
        if self.kubernetes:
            out.append("Kubernetes:")
            for k in self.kubernetes:
                out.append(f"  {k.action}: {k.object}" + (f": {k.detail}" if k.detail else ""))
        unread = [f for f in self.files if f.note]
        if unread:
            out.append("Not read (their impact not computed):")
            out += [f"  not read: {f.path}: {f.note}" for f in unread]
        others = [(f.path, other_class(f.path)) for f in self.files if other_class(f.path) and not f.note]
        if others:
            out.append("Other files:")
            out += [f"  {what}: {path}" for path, what in others]
        return out

    def text(self, where: str) -> str:
        lines = [f"{where}: {len(self.files)} file(s) would change"]
        bad = self.disruptive()
        if bad:
            lines.append(f"disruptive ({len(bad)}), apply these with care:")
            lines += [f"  {b}" for b in bad]
        lines += self.impact_lines()
        body = "\n".join(lines) + "\n"
        body += "".join(f.diff or ("" if f.note else f"binary file {f.path} {f.status}\n") for f in self.files)
        return printable_text(body)  # file content is no one's terminal: escapes shown, newlines and tabs kept

    def to_json(self) -> str:
        how = {a: HOW[a] for a in sorted({c.action for c in self.slurm}, key=ACTIONS.index)}
        return json.dumps({"slurm_release": self.release, "disruptive": self.disruptive(), "slurm_how": how,
                           "moves": [asdict(m) | {"steps": m.steps()} for m in self.moves],
                           "files": [asdict(f) for f in self.files],
                           "slurm": [asdict(c) | {"nodes": list(c.nodes)} for c in self.slurm],
                           "kubernetes": [asdict(c) for c in self.kubernetes],
                           "other": [{"path": f.path, "action": other_class(f.path)} for f in self.files
                                     if other_class(f.path)]}, indent=2, sort_keys=True)


OTHER = (("README.md", "none (documentation)"), ("plan.json", "none (the plan, for tools)"),
         ("kubernetes/node-labels.sh", "run it again (node labels and taints; pods already placed stay)"),
         ("gitops/", "applied by the next Argo CD / Flux sync (what it syncs is listed above)"),
         ("pulumi/", "applied by the next `pulumi up` (what it applies is listed above)"),
         ("kubernetes/kustomization.yaml", "applied by the next `kubectl apply -k`"))


def other_class(path: str) -> str | None:
    """The class of a changed file that neither plane's impact covers object by object."""
    if path.startswith("slurm/") or path.startswith(("kubernetes/manifests/", "kubernetes/workloads/",
                                                      "kubernetes/helm/")):
        return None
    return next((what for prefix, what in OTHER if path == prefix or (prefix.endswith("/") and path.startswith(prefix))),
                "changed (no running object reads it)")


def _short(value: str | None, limit: int = 80) -> str:
    if value is None:
        return "(none)"
    one = " | ".join(value.splitlines())
    return one if len(one) <= limit else one[:limit - 3] + "..."


def _nodes(c: SlurmChange) -> str:
    if not c.nodes:
        return ""
    from generator.spec import hostlist

    try:
        return f" [nodes {hostlist.compress(list(c.nodes))}]"
    except Exception:  # noqa: BLE001
        return f" [nodes {','.join(c.nodes)}]"


def _text(data: bytes | NotRead | None) -> str | None:
    if data is None or isinstance(data, NotRead):
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _release(files: dict[str, bytes]) -> str | None:
    try:
        return str(json.loads(files["plan.json"])["versions"]["slurm"])
    except (KeyError, ValueError, TypeError):
        return None


def _gpu_nodes(files: dict[str, bytes]) -> int | None:
    try:
        planes = json.loads(files["plan.json"])["planes"]
        return sum(int(p["node_count"]) for name, p in planes.items() if name != "slurm" and p.get("gpus")) or None
    except (KeyError, ValueError, TypeError, AttributeError):
        return None


def _packages(text: str | None) -> str | None:
    """The `(packages)` pseudo file of a bundle's bringup/vars.yaml (None: no bring-up, or not readable)."""
    if text is None:
        return None
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return packages_of_vars(data) if isinstance(data, dict) and data.get("orchgen_slurm_release") else None


def read_tree(root: Path, skip=lambda p: False) -> dict[str, bytes | NotRead]:
    """Every file of a bundle folder, read through bundle.read_inside: a link leading out of the
    folder, a FIFO, a device or a huge file is a NotRead (its reason), never its content."""
    from generator.bundle import LinkOutside, listed, read_inside
    from generator.spec.inputs import Refused

    root = Path(root)
    if not root.is_dir():
        return {}
    out: dict[str, bytes | NotRead] = {}
    for path in listed(root):
        rel = path.relative_to(root).as_posix()
        if skip(rel):
            continue
        try:
            out[rel] = read_inside(root, rel)
        except LinkOutside as exc:
            out[rel] = NotRead(str(exc))
        except Refused as exc:
            out[rel] = NotRead(f"not read: it {exc}")
        except OSError as exc:
            out[rel] = NotRead(f"cannot read: {exc.strerror or exc}")
    return out


def compare(old: dict[str, bytes], new: dict[str, bytes], old_label: str, new_label: str,
            charts: Path | None = None) -> Impact:
    """What changes from bundle files `old` to `new` (operator-owned files and the marker already out)."""
    release = _release(new) or _release(old) or "22.05"
    impact = Impact(release)
    for path in sorted(old.keys() | new.keys()):
        a, b = old.get(path), new.get(path)
        if a == b and not isinstance(a, NotRead):
            continue
        status = "added" if a is None else "removed" if b is None else "changed"
        unread = next((x.reason for x in (a, b) if isinstance(x, NotRead)), "")
        if unread:  # named with why, never compared: its impact is not computed either
            impact.files.append(FileDiff(path, status, "", unread))
            continue
        ta, tb = _text(a), _text(b)
        diff = ""
        if (a is None or ta is not None) and (b is None or tb is not None):
            diff = "".join(difflib.unified_diff(
                (ta or "").splitlines(keepends=True), (tb or "").splitlines(keepends=True),
                f"{old_label}/{path}" if a is not None else "/dev/null",
                f"{new_label}/{path}" if b is not None else "/dev/null"))
            if diff and not diff.endswith("\n"):
                diff += "\n\\ No newline at end of file\n"
        impact.files.append(FileDiff(path, status, diff))
    unread = {f.path for f in impact.files if f.note}  # left out of both sides: no object counts as gone
    texts_old = {p: t for p, d in old.items() if p not in unread and (t := _text(d)) is not None}
    texts_new = {p: t for p, d in new.items() if p not in unread and (t := _text(d)) is not None}
    sub = lambda files: {p[len("slurm/"):]: t for p, t in files.items() if p.startswith("slurm/")}  # noqa: E731
    if any(p.startswith("slurm/") for p in texts_old.keys() | texts_new.keys()):
        old_slurm, new_slurm = sub(texts_old), sub(texts_new)
        # Slurm's packages the bring-up installs (release, packaging, source): an upgrade when they change
        pa, pb = _packages(texts_old.get("bringup/vars.yaml")), _packages(texts_new.get("bringup/vars.yaml"))
        if pa is not None and pb is not None:
            old_slurm[PACKAGES], new_slurm[PACKAGES] = pa, pb
        impact.slurm = impact_of_files(old_slurm, new_slurm, release)
    impact.kubernetes = kube_impact(texts_old, texts_new, charts, _gpu_nodes(new))
    impact.moves = node_moves(texts_old.get("plan.json"), texts_new.get("plan.json"))
    return impact


def against_lines(old_root: Path, new_root: Path, old_label: str, exclude: tuple[str, ...] = ()) -> list[str]:
    """`validate NEW --against OLD`: the impact classes (no content diff), disruptive ones first.
    `exclude`: path prefixes left out (a multi-cluster bundle's clusters/, compared cluster by cluster)."""
    from generator.bundle import MARKER, operator_owned

    skip = lambda p: (p == MARKER or operator_owned(p) or ".git" in p.split("/")  # noqa: E731
                      or p.startswith(exclude))
    from .kube import charts_dir

    impact = compare(read_tree(old_root, skip), read_tree(new_root, skip), old_label, str(new_root), charts_dir())
    if not impact:
        return []
    bad = impact.disruptive()
    return ([f"impact: {len(impact.files)} file(s) changed; {len(bad)} disruptive change(s)"]
            + [f"  disruptive: {b}" for b in bad] + impact.impact_lines())
