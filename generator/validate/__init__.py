"""`orchgen validate`: checks of a written bundle, ours or hand-edited, before it is applied.

`bundle_checks.validate_bundle` runs them all over a `bundle_view` of the directory: Slurm
(`slurm_conf`, `slurm_checks`), Kubernetes objects against built-in schemas (`builtin`), CRDs
(`crds`) and their CEL rules (`cel`), Helm values against chart defaults (`values`,
`helm_checks`), Slinky (`slinky_checks`), references between files (`kube_refs`, `cross_checks`)
and secrets (`secrets_check`).
A multi-cluster bundle's clusters/<name>/ folders are each checked as a single cluster's bundle
(`clusters`: a view of the folder with plan.json narrowed to that cluster). `replan` compares a
bundle with an older one (`--against`, cluster by cluster for a multi-cluster bundle): what a
re-plan creates, changes and deletes, and the updates the API server would refuse.

May import: generator.spec (hostlists, fabric labels), generator.decide.plan's constants,
generator.render where a renderer owns a format, generator.impact (what a re-plan does,
for `--against`), bundle, errors, catalog. It reads files only:
never the input workload.yaml, never the planner. jsonschema, kubernetes-validate and cel-python
are imported here alone, so `plan` never loads them.
"""
