"""What `orchgen plan` prints after writing a bundle: the files grouped by folder, and the next
step per plane. Text only; cli.py prints it."""
from __future__ import annotations

import posixpath
import shlex
import textwrap
from pathlib import Path

from .terminal import width as terminal_width, wrap

PLANE_TITLES = {"slurm": "Slurm", "kubernetes": "Kubernetes", "k3s": "k3s"}  # the README's headings


def listing(files: dict[str, bytes]) -> list[str]:
    """One entry per folder, its file names after it (wrapped), folders in the bundle's order."""
    folders: dict[str, list[str]] = {}
    for path in files:
        folder, name = posixpath.split(path)
        folders.setdefault(folder + "/" if folder else "./", []).append(name)
    pad = min(max(len(f) for f in folders), 28) + 2 if folders else 0
    out, columns = [], terminal_width()
    for folder, names in folders.items():
        head = f"  {folder:<{pad}}"
        body = f"{len(names)} file{'s' if len(names) > 1 else ''}: " + ", ".join(names)
        out += textwrap.wrap(body, columns, initial_indent=head, subsequent_indent=" " * len(head), break_long_words=True,
                             break_on_hyphens=False)
    return out


def rule_of(d) -> str:
    """The rule that chose a workload's plane, in words: `rule <name>`, or the pin that overrode the rules."""
    if d.rule == "pinned" or (not d.rule and d.pinned):
        return f"pinned (plane: {d.plane})"
    return f"rule {d.rule}" if d.rule else "rule ?"


def workload_lines(plan) -> list[str]:
    """One line per workload: its plane, its pool and the rule that chose the plane."""
    width = max((len(d.name) for d in plan.workloads), default=0)
    kube = plan.kube_plane
    return [w for d in plan.workloads
            for w in wrap(f"  {d.name + ':':<{width + 1}} {d.plane}{f' + {kube.name} (services)' if d.hybrid and kube else ''}, "
                          f"pool {d.pool}, {rule_of(d)}", width + 2)]


def next_steps(plan, output: Path, warnings: int, columns: int | None = None) -> list[str]:
    """The next step after `plan`, per plane: read the bundle README, validate, install, check; wrapped to
    `columns` (default: the terminal's width)."""
    out = shlex.quote(str(output))
    lines = [f"next: read {out}/README.md (a checklist per plane); then:"]
    if warnings:
        lines.append(f"  0. {warnings} warning{'s' if warnings > 1 else ''} above: "
                     "each names the workload.yaml field to fix or accept")
    lines.append(f"  1. orchgen validate {out}    # check the bundle before it touches a cluster")
    step = 2
    for name, p in plan.planes.items():
        if name == "slurm" and p.host == "bare-metal":
            lines.append(f"  {step}. slurm: install Slurm on its hosts with {out}/slurm/ "
                         "(README: \"Slurm: checklist\")")
            step += 1
    kube = plan.kube_plane
    if kube is not None:
        operator = next((p.operator for p in plan.planes.values() if p.operator), None)  # Slurm's, on Kubernetes
        what = f"{kube.name}" + (f" + Slurm ({operator})" if operator else "")
        if plan.clusters:  # beyond one cluster: a stack per cluster, the workers before the manager
            how = (f"per worker cluster W, bash {out}/clusters/W/kubernetes/node-labels.sh, then cd "
                   f"{out}/clusters/W/pulumi && pulumi up; then the manager's kubeconfig Secrets and cd "
                   f"{out}/clusters/manager/pulumi && pulumi up (README: \"Beyond one cluster\")")
        elif plan.gitops in ("argocd", "flux"):
            how = f"commit {out}/ to your GitOps repository and apply {out}/gitops/bootstrap/ " \
                  f"(README: \"GitOps\"), or: cd {out}/pulumi && pulumi up"
        else:
            how = f"bash {out}/kubernetes/node-labels.sh, then cd {out}/pulumi && pulumi up " \
                  f"(or helm install: README, \"{PLANE_TITLES.get(kube.name, kube.name)}: checklist\")"
        lines.append(f"  {step}. {what}: on an existing cluster, {how}")
    return [w for line in lines for w in wrap(line, 3, columns)]
