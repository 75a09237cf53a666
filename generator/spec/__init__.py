"""The input side: what workload.yaml says, checked, with nothing decided yet.

- `models.py`: the pydantic models of workload.yaml (the public input contract);
- `load.py`: `load(path)` / `load_located(path)`: YAML with the line of every key, validated,
  errors as `file:line: field: message`;
- `checks.py`: rules that span fields (references, duplicates, hostnames);
- `hostlist.py`: Slurm hostlist expand / compress;
- `fabric.py`: the one fabric model (node -> leaf -> spine, NVLink domains), built from the leaves as
  cabled, an import or the shorthand, and its node labels;
- `importers.py`: the cabling from the files sites keep (topology.conf, topology.yaml, ibnetdiscover).

May import: errors, catalog and the standard library / PyYAML / pydantic. Never the decision
(generator.decide) nor a renderer: the input is described before anything is decided about it.
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .load import load, load_located
    from .models import Fleet, Pool, Tenant, Workload, format_path, json_schema

__all__ = ["load", "load_located", "Fleet", "Pool", "Tenant", "Workload", "format_path", "json_schema"]

# Imported on first use (PEP 562): building the pydantic models is most of a command's start-up, and
# a command that needs only a submodule (`init`'s spec.mig, `--help`) should not pay for it.
_LAZY = {"load": ".load", "load_located": ".load", "Fleet": ".models", "Pool": ".models", "Tenant": ".models",
         "Workload": ".models", "format_path": ".models", "json_schema": ".models"}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = import_module(_LAZY[name], __name__)
    # every name of that module at once: importing the submodule `.load` binds the package attribute
    # `load` to the module, which would then shadow the function `load` for good
    for other, where in _LAZY.items():
        if where == _LAZY[name]:
            globals()[other] = getattr(module, other)
    return globals()[name]
