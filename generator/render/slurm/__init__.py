"""The Slurm plane's renderers: everything under a bundle's slurm/.

- `model.py`: the Slurm model, decided once from the Plan (node groups with their GRES, partitions,
  accounts, Ray launchers), refusing what a real slurmctld would reject;
- `topology.py`: the network topology cut from the fabric model for the Slurm version
  (topology.conf tree or block, or topology.yaml);
- `files.py`: slurm.conf, gres.conf, cgroup.conf, topology, accounts.sh and the Ray launchers,
  from templates/slurm over the model.

May import: the Plan (generator.decide.plan), generator.spec's hostlists, errors, yamlio and
templating. Slinky and Soperator (render/kubernetes) read this model; nothing here reads theirs.
"""
from .files import render, slurm_config, summary

__all__ = ["render", "slurm_config", "summary"]
