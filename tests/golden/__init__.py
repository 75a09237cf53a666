"""Golden bundles: the exact bytes `orchgen plan` writes for a few examples, kept in the repository.

Each case below is an example (plus, for one, an option a site would set) whose bundle is stored
under tests/golden/<case>/. tests/test_golden.py plans each case and compares every file byte for
byte; after an intended change, regenerate them all with

    .venv/bin/python -m tests.golden --update

and review the diff (`git diff tests/golden`) like code. Together the cases cover every plane
(Slurm on bare metal, Kubernetes, k3s, Ray, a partitioned hybrid, Slinky and Soperator), every
provider path (generic/bare metal, EKS, GKE, AKS, OKE), every GitOps mode (none, kustomize, argocd,
flux) and every gang scheduler (Kueue, Volcano, KAI). The 16k-node superpod is left out: too big
to review.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent
EXAMPLES = REPO / "examples"


@dataclass(frozen=True)
class Case:
    name: str  # the directory under tests/golden/
    example: str  # examples/<example>.yaml
    options: dict[str, Any] = field(default_factory=dict)  # options.* set on top of the example's
    why: str = ""


CASES: tuple[Case, ...] = (
    Case("fsdp-pretraining", "fsdp-pretraining", why="Slurm on bare metal, no GitOps"),
    Case("dev-ci", "dev-ci", why="k3s, no gang scheduler"),
    Case("grpo-rl", "grpo-rl", why="Ray on Kubernetes (KubeRay), generic cloud, Kueue"),
    Case("research-lab", "research-lab", why="partitioned hybrid (Slurm + Kubernetes on bare metal), kustomize"),
    Case("cloud-training", "cloud-training", why="Slurm on Kubernetes with Slinky, Argo CD"),
    Case("soperator-lab", "soperator-lab", why="Slurm on Kubernetes with Soperator, Flux"),
    Case("eks-training", "eks-training", why="EKS (EFA), Argo CD"),
    Case("gke-training", "gke-training", why="GKE, Flux"),
    Case("aks-inference", "aks-inference", why="AKS, Volcano, kustomize"),
    Case("oke-training-kai", "oke-training", {"gang_scheduler": "kai"},
         why="OKE (RoCE), Ray, KAI Scheduler, kustomize"),
    Case("serving-platform", "serving-platform",
         why="serving platform on EKS: KServe, LeaderWorkerSet, RayService, KEDA, Ingress and HTTPRoute"),
    Case("nvl72-kubernetes", "nvl72-kubernetes",
         why="GB200 NVL72 on Kubernetes: the NVIDIA DRA driver, ComputeDomains, the clique Topology"),
)


def plan_of(case: Case):
    from ..support import plan_of

    return plan_of(EXAMPLES / f"{case.example}.yaml", **case.options)


def bundle_of(case: Case) -> dict[str, bytes]:
    """The files `orchgen plan examples/<example>.yaml` writes (with the case's options set)."""
    from generator.render import render

    return render(plan_of(case))


def stored(case: Case) -> dict[str, bytes]:
    root = GOLDEN / case.name
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def differences(case: Case, files: dict[str, bytes] | None = None, context: int = 3,
                limit: int = 200) -> list[str]:
    """A unified diff (golden -> now) of each file that changed, plus files added and removed."""
    files = bundle_of(case) if files is None else files
    old = stored(case)
    out: list[str] = []
    for rel in sorted(set(old) | set(files)):
        before, after = old.get(rel), files.get(rel)
        if before == after:
            continue
        if before is None or after is None:
            out.append(f"{'added' if before is None else 'removed'}: {case.name}/{rel}")
            continue
        try:
            a, b = before.decode().splitlines(True), after.decode().splitlines(True)
        except UnicodeDecodeError:
            out.append(f"changed (binary): {case.name}/{rel}")
            continue
        out += [line.rstrip("\n") for line in difflib.unified_diff(
            a, b, f"golden/{case.name}/{rel}", f"now/{case.name}/{rel}", n=context)]
    if len(out) > limit:
        out = out[:limit] + [f"... {len(out) - limit} more lines: run `python -m tests.golden --diff`"]
    return out


def update(case: Case) -> list[str]:
    """Write the case's bundle as its golden copy; the paths written, changed or removed."""
    files = bundle_of(case)
    old = stored(case)
    root = GOLDEN / case.name
    touched = []
    for rel in sorted(set(old) - set(files)):
        (root / rel).unlink()
        touched.append(f"removed {case.name}/{rel}")
    for rel, data in sorted(files.items()):
        if old.get(rel) != data:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
            touched.append(f"{'wrote' if rel in old else 'added'} {case.name}/{rel}")
    for directory in sorted((p for p in root.rglob("*") if p.is_dir()), reverse=True):
        if not any(directory.iterdir()):
            directory.rmdir()
    return touched
