"""The Helm values builders of the Slurm-on-Kubernetes releases (Slinky, Soperator), by release name.

They read the Slurm model, so they stay out of helm.VALUES and reach helm.render through its `extra`
seam (generator.render.renderers); the bundle README (render/report.py) lists their releases too.
One module for both readers, so neither imports the package above it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...decide.plan import Plan


def slurm_on_kubernetes_values() -> dict[str, Callable[[Plan], dict[str, Any]]]:
    from . import slinky, soperator

    return {**slinky.VALUES, **soperator.VALUES}
