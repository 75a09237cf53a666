"""The decision side: from the checked input (generator.spec) to the Plan every renderer reads.

- `rules.py`: per workload, the decision guide's rules (first match wins) and their reasons;
- `planner.py`: per fleet, `make_plan(fleet, source)`: planes, hybrid mode, gang scheduler,
  charts, tenants' quotas;
- `partition.py`: which nodes of which pool each plane owns (options.split), and the leaves both share;
- `placement.py`: each workload's pool and tenant, held to what the split gave its plane;
- `quotas.py`: the tenants' guarantees per pool (services' demand, then shares);
- `sizing.py`: the pods of each Kubernetes workload's starter;
- `slurm_names.py`: input rules that hold only once Slurm is decided on;
- `plan.py`: the Plan and its parts (serialised to plan.json).

May import: generator.spec (models, hostlists, the fabric model), errors, catalog. Never a
renderer: the Plan grows when a renderer needs a fact, the renderer does not re-decide.
"""
from .planner import make_plan, per_workload
from .rules import decide_workload, recommend

__all__ = ["make_plan", "per_workload", "decide_workload", "recommend"]
