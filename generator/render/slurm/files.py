"""The Slurm plane's files: `slurm_config(plan)` is the one source of truth ({file name: text});
`render(plan)` writes it under slurm/ when Slurm runs on bare metal. A Slurm-on-Kubernetes renderer
(Slinky, Soperator) reuses `slurm_config` or `model.model` for the same nodes, GRES, partitions and
topology.

Line-oriented files come from templates/slurm/*.j2 over the model; topology.yaml is dumped from data.
"""
from __future__ import annotations

from ...decide.plan import Plan
from ...yamlio import dump_json, dump_yaml
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
    if name == "grafana-slurm.json":
        return dump_json(dashboard(m)).decode()
    return _template(_TEMPLATES.get(name, f"{name}.j2"), m)


def _panel(n: int, title: str, kind: str, exprs: list[tuple[str, str]], description: str, unit: str = "short") -> dict:
    """One panel of the dashboard, 8 units high, two a row; each says what it reads in its description (JSON has
    no comments: the description is where a reader finds why)."""
    return {"id": n + 1, "title": title, "type": kind, "description": description,
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "gridPos": {"h": 8, "w": 12, "x": 12 * (n % 2), "y": 8 * (n // 2)},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "targets": [{"refId": chr(65 + i), "expr": e, "legendFormat": legend} for i, (e, legend) in enumerate(exprs)]}


def dashboard(m: SlurmModel) -> dict:
    """The Grafana dashboard (schemaVersion 39, Grafana 10/11's) over prometheus-slurm.yaml's jobs: Slurm's state,
    the checks' NCCL verdict, the hosts (node exporter) and the GPUs (DCGM exporter). Import it in Grafana
    (Dashboards > New > Import), choosing the Prometheus that scrapes the jobs."""
    c = f'cluster="{m.cluster}"'
    panels = [
        ("Nodes drained", "stat", [(f"max(slurm_nodes_drain{{{c}}})", "drained")],
         "slurm_nodes_drain: nodes with the DRAIN flag (alert SlurmNodesDrained); sinfo -R says why"),
        ("GPUs idle while jobs pend, per partition", "timeseries",
         [(f"max by (partition) (slurm_partition_gpus{{{c}}}) - max by (partition) "
           f"(slurm_partition_jobs_gpus_alloc{{{c}}})", "{{partition}} idle GPUs"),
          (f"max by (partition) (orchgen_slurm_partition_jobs_pending_resources{{{c}}})",
           "{{partition}} jobs pending on resources or priority"),
          (f"max by (partition) (slurm_partition_jobs_pending{{{c}}})", "{{partition}} jobs pending, any reason")],
         "slurm_partition_gpus minus slurm_partition_jobs_gpus_alloc beside the jobs pending on resources or priority "
         "(squeue reason Resources, Priority: the bundle's exporter's orchgen_slurm_partition_jobs_pending_resources, "
         "what alert SlurmGPUsPendingWhileIdle reads) and every pending job (held, dependent and limited ones too)"),
        ("NCCL on sockets (last check)", "stat", [(f"max(orchgen_nccl_socket_fallback{{{c}}})", "socket fallback")],
         "checks/run.py's last NCCL verdict through the node exporter's textfile collector: 1 = NCCL fell back to "
         "sockets (alert SlurmNCCLOnSockets)"),
        ("Production checks (last run)", "stat", [(f"min by (check) (orchgen_check_ok{{{c}}})", "{{check}}")],
         "orchgen_check_ok: 1 passed, 0 failed, per check of checks/run.py's last run on a controller"),
        ("CPU busy per host", "timeseries",
         [(f'1 - avg by (instance) (rate(node_cpu_seconds_total{{{c}, mode="idle"}}[5m]))', "{{instance}}")],
         "node exporter: the share of CPU time not idle over 5 m", "percentunit"),
        ("Memory available per host", "timeseries",
         [(f"node_memory_MemAvailable_bytes{{{c}}}", "{{instance}}")],
         "node exporter: MemAvailable (what jobs can still get)", "bytes"),
        ("GPU utilization", "timeseries",
         [(f"avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL{{{c}}})", "{{Hostname}}")],
         "DCGM exporter: DCGM_FI_DEV_GPU_UTIL averaged over each node's GPUs (empty until it runs on the GPU nodes)",
         "percent"),
        ("GPU XID errors", "timeseries", [(f"max by (Hostname, gpu) (DCGM_FI_DEV_XID_ERRORS{{{c}}})",
                                           "{{Hostname}} GPU {{gpu}}")],
         "DCGM exporter: the last XID error of each GPU (NHC's gpu-health.sh drains on the fatal ones)"),
    ]
    return {
        "title": f"Slurm {m.cluster}",
        # JSON has no comments: the settings a site tunes say why here (Grafana shows it under the title)
        "description": f"Written by orchgen plan for cluster {m.cluster}: Slurm's state, the production checks' "
                       "verdicts, the hosts (node exporter) and the GPUs (DCGM exporter), as slurm/prometheus-slurm.yaml "
                       "scrapes them. refresh 1m: Slurm's metrics change once a minute (the bundle's exporter's timer, "
                       "the slurmctld scrape jobs' 60 s); time 6h: a day shift's drains and pending queues at a glance.",
        "uid": f"orchgen-slurm-{m.cluster}"[:40],  # Grafana's uid limit: 40 characters
        "tags": ["orchgen", "slurm"],
        "schemaVersion": 39,
        "editable": True,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "1m",  # the Slurm scrape jobs' 60 s: a faster refresh shows nothing new
        "templating": {"list": [{"name": "datasource", "label": "Prometheus", "type": "datasource",
                                 "query": "prometheus", "current": {}, "hide": 0}]},
        "panels": [_panel(i, *p) for i, p in enumerate(panels)],
    }


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
