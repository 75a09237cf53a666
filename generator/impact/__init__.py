"""What a re-plan does to a running site (issue 23): per changed setting of a bundle, the action
that applies it and what it disrupts. `slurm.py`: the Slurm side (one table, keyed by setting and
release); `kube.py`: the Kubernetes side; `bundle.py`: both, for `plan --diff` and
`validate --against`.

May import: generator.spec's hostlists, generator.bundle's marker, the standard library and PyYAML.
It reads two bundles' files, never the input workload.yaml or the planner, so `plan --diff` and `validate --against` share it.
"""
