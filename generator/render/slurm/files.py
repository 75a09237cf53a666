"""The Slurm plane's files: `slurm_config(plan)` is the one source of truth ({file name: text});
`render(plan)` writes it under slurm/ when Slurm runs on bare metal. A Slurm-on-Kubernetes renderer
(Slinky, Soperator) reuses `slurm_config` or `model.model` for the same nodes, GRES, partitions and
topology.

Line-oriented files come from templates/slurm/*.j2 over the model; topology.yaml is dumped from data.
"""
from __future__ import annotations

from ...decide.plan import Plan
from ...yamlio import dump_yaml
from ..templating import render_template
from . import carried
from .model import RayJob, SlurmModel, model


def slurm_config(plan: Plan) -> dict[str, str]:
    """{file name: text} of the Slurm plane's configuration, whatever hosts it."""
    m = model(plan)
    jobs = {j.file: j for j in m.ray_jobs}
    files = {name: _file(m, name, jobs.get(name)) for name in m.files}
    pools: dict[str, set[str]] = {}
    for g in m.groups:
        pools.setdefault(g.pool, set()).update(g.nodes)
    return carried.apply(plan.site, files, pools)  # workload.yaml site: in place (issue 22)


def _file(m: SlurmModel, name: str, job: RayJob | None) -> str:
    if job is not None:
        return render_template("slurm/ray.sbatch.j2", m=m, job=job).decode()
    if name == "topology.yaml":  # YAML is dumped from data; only its comment header is a template
        # key order as built, not sorted: topology.yaml(5) says each entry's `topology` "Must be the first
        # attribute" (and orchgen's own importer holds a file to it)
        return _template("topology.yaml.header.j2", m) + dump_yaml(m.topology.yaml_data(), sort_keys=False).decode()
    return _template(_TEMPLATES.get(name, f"{name}.j2"), m)


# Files whose template is not named after them (templates/slurm holds no subdirectories).
_TEMPLATES = {"plugstack.conf.d/pyxis.conf": "pyxis.conf.j2", "prolog.d/50-orchgen-dcgm.sh": "prolog-dcgm.sh.j2",
              "epilog.d/50-orchgen-hygiene.sh": "epilog-hygiene.sh.j2"}


def _template(name: str, m: SlurmModel) -> str:
    return render_template(f"slurm/{name}", m=m, o=m.ops).decode()


def render(plan: Plan) -> dict[str, bytes]:
    """Bare-metal Slurm: the configs under slurm/. Slurm on Kubernetes is written by its operator's
    renderer (from `slurm_config`), so nothing here then."""
    plane = plan.slurm_plane
    if plane is None or plane.host != "bare-metal":
        return {}
    return {f"slurm/{name}": text.encode() for name, text in slurm_config(plan).items()}


def summary(plan: Plan) -> SlurmModel | None:
    """The model for the README's Slurm section (None without a Slurm plane)."""
    return model(plan) if plan.slurm_plane else None
