"""plan.json (the decision, machine-readable) and README.md (the same, for the operator)."""
from __future__ import annotations

from ..contract import bringup_os_line
from ..decide.plan import Plan
from ..spec.site import ORCHGEN_BETTER, ORCHGEN_BETTER_NODES
from ..yamlio import dump_json
from . import slurm
from ..spec.checks import PROVIDER_POOL_LABEL
from .bringup import manual
from .kubernetes import common as kube_common, gang_check, gpu_operator, helm, kai, kueue, manifests, metrics, nccl_check, ray, slinky, soperator
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
            nodes, leaves = len(s.nodes), len(s.leaves)
            lines.append(f'  P_{plane.name} --> S_{plane.name}_{i}["{s.pool}: {nodes} node{"s" * (nodes != 1)}, '
                         f'{gpu}<br/>{leaves} lea{"f" if leaves == 1 else "ves"}"]')
    for i, w in enumerate(plan.workloads):
        label = w.name + (" (gang)" if w.gang_scheduler_required else "")
        lines.append(f'  W_{i}(["{label}"]) --> P_{w.plane}')
        if w.hybrid and plan.kube_plane and plan.kube_plane.name != w.plane:
            lines.append(f"  W_{i} -. services .-> P_{plan.kube_plane.name}")
    return "\n".join(lines)


MARKER = "<!-- orchgen:checklist -->"
REFERENCE_WIDTH = 100  # the Reference line's wrap (Markdown source: a reader's editor, not a terminal)


def anchor(heading: str, seen: dict[str, int]) -> str:
    """GitHub's anchor of a Markdown heading (github-slugger): lower case, markup and punctuation dropped
    (letters, digits, `-`, `_` and spaces kept), spaces as `-`; a repeated heading gets -1, -2 ..."""
    slug = "".join(c for c in heading.lower() if c.isalnum() or c in "-_ ").replace(" ", "-")
    n = seen.get(slug, 0)
    seen[slug] = n + 1
    return f"{slug}-{n}" if n else slug


def headings(text: str) -> list[tuple[int, str, str]]:
    """(level, title, anchor) of every `#`-heading outside code blocks, in order."""
    out, seen, fenced = [], {}, False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced and line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            if line[level:level + 1] == " ":
                title = line[level + 1:].strip()
                out.append((level, title, anchor(title, seen)))
    return out


def checklist(text: str) -> str:
    """The README's first screen: each plane's checklist, step by step, and the reference sections, each a
    link to its heading below; built from the rendered README's own headings, so that every link lands."""
    import textwrap

    heads = headings(text)
    lines = ["## Checklist", "",
             "Each step links to its section below; do them in this order. The reference follows the checklists.",
             ""]
    first = [h for h in heads if h[0] == 2 and h[1].startswith("First: ")]
    for _, title, slug in first:
        lines.append(f"- [ ] [{title}](#{slug})")
    plane = None
    for i, (level, title, slug) in enumerate(heads):
        if level == 2:
            plane = title.removesuffix(": checklist") if title.endswith(": checklist") else None
            if plane:
                lines += ([""] if lines[-1] else []) + [f"**[{title}](#{slug})**", ""]
        elif level == 3 and plane:
            lines.append(f"- [ ] [{title}](#{slug})")
    ref = [f"[{title}](#{slug})" for level, title, slug in heads
           if level == 2 and not title.endswith(": checklist") and not title.startswith("First: ")
           and title not in ("Checklist", "Reference")]
    lines += ["", *textwrap.wrap("Reference: " + " · ".join(ref), REFERENCE_WIDTH, break_long_words=False,
                                 break_on_hyphens=False)]
    return "\n".join(lines)


def with_checklist(readme: bytes) -> bytes:
    text = readme.decode()
    assert MARKER in text, "templates/readme/header.md.j2 places the checklist"
    return text.replace(MARKER, checklist(text.replace(MARKER, "## Checklist"))).encode()


def render(plan: Plan) -> dict[str, bytes]:
    return {
        "plan.json": dump_json(plan.to_json()),
        "README.md": with_checklist(render_template("README.md.j2", plan=plan, mermaid=mermaid(plan),
                                     titles=PLANE_TITLES, slurm_summary=slurm.summary,
                                     slurm_operator=operator_readme, gpu_quota=gpu_quota,
                                     plane_gpu_quota=plane_gpu_quota, lws_gpu_quota=lws_gpu_quota,
                                     mig_layouts=gpu_operator.mig_layouts, kubelet_reserved=kubelet_reserved,
                                     kube_names=manifests.readme(plan) if plan.kube_plane else {},
                                     checks_gang=gang_check.gang(plan) if plan.kube_plane else None,
                                     checks_nccl=nccl_check.nccl(plan) if plan.kube_plane else None,
                                     not_installed=manual.not_installed if plan.slurm_plane else (lambda p: []),
                                     nccl_tests=manual.nccl_tests([]),
                                     bringup_os_line=bringup_os_line,
                                     crd_owners=sorted(helm.CRD_GROUPS),
                                     crd_in_templates=[c for c in helm.CRDS_IN_TEMPLATES if c in plan.charts],
                                     kueue_wait=kueue.wait_for_pods_ready(plan) if plan.kube_plane else {},
                                     gpu_operator_values=gpu_operator.values,
                                     metrics_view=metrics.readme(plan),
                                     provisioner_of=provisioner_of, topology_note=topology_note,
                                     prometheus_url=metrics.prometheus_url(plan),
                                     releases=_written_releases(plan),
                                     kai_gitops_config="kai-scheduler" in plan.charts and "kaiConfig" in
                                     kai.values(plan),
                                     kai_v17="kai-scheduler" in plan.charts and "admission" not in kai.values(plan),
                                     ray_elastic=[w.name for w in ray.ray_workloads(plan) if ray.elastic(plan, w)],
                                     ray_resizes=ray.scheduler_resizes(plan),
                                     orchgen_better=ORCHGEN_BETTER, orchgen_better_nodes=ORCHGEN_BETTER_NODES)),
    }


def _written_releases(plan: Plan) -> list[dict[str, object]]:
    """The releases releases.yaml lists (the Slurm-on-Kubernetes ones too), in install order: the
    checklist's helm commands install every one of them."""
    from .kubernetes.slurm_values import slurm_on_kubernetes_values

    builders = {**helm.VALUES, **slurm_on_kubernetes_values()}
    return [r for r in helm.releases(plan) if r["name"] in builders]


def gpu_quota(plan: Plan, tenant: object) -> str:
    """A tenant's ResourceQuota GPU caps as the README shows them: `16`, or with MIG pools
    `16 gpu, 112 mig-1g.10gb` (resources in the ResourceQuota's order); none under Kueue (the README
    has no such column there)."""
    caps = kube_common.resource_quota_gpus(plan, tenant)  # type: ignore[arg-type]
    if list(caps) == [kube_common.GPU]:
        return str(caps[kube_common.GPU])
    return ", ".join(f"{n} {r.removeprefix('nvidia.com/')}" for r, n in caps.items())


def _caps_text(caps: dict[str, int]) -> str:
    if list(caps) == [kube_common.GPU]:
        return str(caps[kube_common.GPU])
    return ", ".join(f"{n} {r.removeprefix('nvidia.com/')}" for r, n in caps.items())


def plane_gpu_quota(plan: Plan) -> str:
    """The whole plane's GPU devices as the README shows a ResourceQuota's caps."""
    return _caps_text(kube_common.plane_devices(plan))


def lws_gpu_quota(plan: Plan) -> list[tuple[str, str]]:
    """(tenant, the GPUs its LeaderWorkerSets' pods hold at max_replicas) for the tenants with some."""
    out = []
    for t in plan.tenants:
        caps = kube_common.lws_pod_devices(plan, t)
        if caps:
            out.append((t.name, ", ".join(f"{n} {r.removeprefix('nvidia.com/')}" if r != kube_common.GPU
                                          else str(n) for r, n in caps.items())))
    return out


def kubelet_reserved(plan: Plan) -> list[dict[str, object]]:
    """Per Kubernetes pool with `reserved`: what the kubelet should keep from pods (system-reserved),
    in Kubernetes' units: the reserved cores' threads as CPUs, the memory in Gi."""
    out = []
    for s in gpu_operator.kube_managed_slices(plan):
        hw = s.hardware
        if hw.reserved_cores or hw.reserved_memory_gib:
            cpu = hw.reserved_cores * hw.threads_per_core
            parts = ([f"cpu={cpu}"] if cpu else []) + ([f"memory={hw.reserved_memory_gib}Gi"] if hw.reserved_memory_gib else [])
            out.append({"pool": s.pool, "hostlist": s.hostlist, "value": ",".join(parts), "cpu": cpu,
                        "memory_gib": hw.reserved_memory_gib, "cores": hw.reserved_cores})
    return out


def operator_readme(plan: Plan) -> object:
    """The README's Slurm-on-Kubernetes section reads the operator's own summary."""
    return {"slinky": slinky.readme, "soperator": soperator.readme}[plan.slurm_plane.operator](plan)


# Who sets a cloud pool's default selector (the same sources as generator/spec/checks.py).
_SETS_POOL_LABEL = {
    "eks": "EKS managed node groups (Karpenter or self-managed nodes: give node_labels)",
    "gke": "GKE, on every node of the node pool",
    "aks": "AKS, on every node of the agent pool",
    "oke": "Oracle's terraform-oci-oke module (initial node label); other provisioners: give node_labels",
}


def provisioner_of(plan: Plan, pool: str) -> str:
    """Who puts the labels that select a cloud pool on its nodes (the README's node table)."""
    provider = plan.platform.provider
    labels = plan.platform.selectors[pool]
    if list(labels) == [PROVIDER_POOL_LABEL.get(provider)]:
        return _SETS_POOL_LABEL[provider]
    if list(labels) == ["orchgen.io/pool"]:
        return ("your provisioner: register the nodes with `--node-labels=orchgen.io/pool=" + pool
                + "` (or give node_labels)")
    return "your provisioner (workload.yaml node_labels)"


_TOPOLOGY_NOTES = {
    "eks": "EKS sets them on the instance types EC2 instance topology supports (p4d, p5, p6, trn); nodes "
           "without them are left out of topology-aware placement, so keep those pools on such types",
    "gke": "GKE sets them on compactly placed VMs (reservations, A3 Ultra, A4 and later); Spot capacity is "
           "rarely compact",
    "oke": "OKE sets them at bootstrap when the capacity topology is available (dedicated capacity pools)",
}


def topology_note(plan: Plan) -> str:
    return _TOPOLOGY_NOTES.get(plan.platform.provider, "")
