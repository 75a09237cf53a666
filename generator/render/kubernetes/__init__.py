"""The Kubernetes plane's renderers: everything under a bundle's kubernetes/.

- `helm.py`: releases.yaml and one values file per release; each chart's values come from the
  chart's own module: `gpu_operator` (per provider profile), `network_operator`, `cert_manager`,
  `kueue`, `volcano`, `kai`, `ray` (KubeRay), `slinky`, `soperator`;
- `manifests.py`: kubernetes/manifests/, kubernetes/workloads/ and node-labels.sh, from
  `tenancy` (namespaces, quotas), `gpu_operator` (GKE's quota), the gang scheduler's module (`kueue`,
  `volcano`, `kai`: queues and topology objects), `network_operator` (the RDMA fabric), `ray`
  (RayClusters), `workloads` (starter manifests) and `labels`;
- `common.py` (names, node selection by pool, topology levels, queue wiring, pod shapes),
  `gang.py` (how an object joins its queue) and `fabric_wiring.py` (what a multi-node pod adds for
  the fabric). How nodes are known and which topology labels exist is the Plan's
  (`plan.platform`, generator/decide/platform.py): nothing here names a node the provider names.

A new chart or scheduler is one module here, registered in `helm.VALUES` (values) and, for a
scheduler, `manifests.SCHEDULERS` (objects). Slinky and Soperator read the Slurm model
(generator.render.slurm) rather than re-deriving nodes, GRES or partitions.

May import: the Plan, generator.spec's fabric labels and hostlists, errors, yamlio,
generator.render.slurm. Never the loader or the planner.
"""
