"""plan.json (the decision, machine-readable) and README.md (the same, for the operator)."""
from __future__ import annotations

from ..decide.plan import Plan
from ..yamlio import dump_json
from . import slurm
from .kubernetes import helm, kueue, manifests, slinky, soperator
from .templating import render_template

PLANE_TITLES = {"slurm": "Slurm", "kubernetes": "Kubernetes", "k3s": "k3s"}


def mermaid(plan: Plan) -> str:
    """What runs on what: workloads -> planes -> pool slices (ids are generated, names are labels)."""
    lines = ["flowchart LR"]
    for plane in plan.planes.values():
        title = PLANE_TITLES[plane.name]
        if plane.operator:
            title += f" on Kubernetes ({plane.operator})"
        lines.append(f'  P_{plane.name}["{title}"]')
        for i, s in enumerate(plane.slices):
            gpu = f"{s.gpus_per_node}x {s.gpu_type}" if s.gpu_type else "CPU"
            lines.append(f'  P_{plane.name} --> S_{plane.name}_{i}["{s.pool}: {len(s.nodes)} nodes, '
                         f'{gpu}<br/>{len(s.leaves)} leaves"]')
    for i, w in enumerate(plan.workloads):
        label = w.name + (" (gang)" if w.gang_scheduler_required else "")
        lines.append(f'  W_{i}(["{label}"]) --> P_{w.plane}')
        if w.hybrid and plan.kube_plane and plan.kube_plane.name != w.plane:
            lines.append(f"  W_{i} -. services .-> P_{plan.kube_plane.name}")
    return "\n".join(lines)


def render(plan: Plan) -> dict[str, bytes]:
    return {
        "plan.json": dump_json(plan.to_json()),
        "README.md": render_template("README.md.j2", plan=plan, mermaid=mermaid(plan),
                                     titles=PLANE_TITLES, slurm_summary=slurm.summary,
                                     slurm_operator=operator_readme,
                                     kube_names=manifests.readme(plan) if plan.kube_plane else {},
                                     crd_owners=sorted(helm.CRD_GROUPS),
                                     crd_in_templates=[c for c in helm.CRDS_IN_TEMPLATES if c in plan.charts],
                                     kueue_wait=kueue.wait_for_pods_ready(plan) if plan.kube_plane else {}),
    }


def operator_readme(plan: Plan) -> object:
    """The README's Slurm-on-Kubernetes section reads the operator's own summary."""
    return {"slinky": slinky.readme, "soperator": soperator.readme}[plan.slurm_plane.operator](plan)
