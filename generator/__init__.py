"""orchgen: facts in (workload.yaml), decision out (the Plan), artifacts real tools accept.

Data flows one way, one package per stage:

    spec/      workload.yaml models, load() with line-aware errors, cross-field checks,
               hostlists, the fabric model                      (imports no later stage)
    decide/    per-workload rules, the fleet planner, the split into planes, the Plan
    render/    Plan -> {path: bytes}, folders mirroring the bundle (slurm/, kubernetes/, gitops/)
    bundle.py  atomic, deterministic write / check
    validate/  checks of a written bundle (ours or hand-edited)

`cli.py` holds the commands and exit codes only; `errors`, `catalog` and `yamlio` are shared by all.
"""
