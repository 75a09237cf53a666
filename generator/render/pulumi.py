"""pulumi/: the Pulumi Python project that installs a bundle's Kubernetes side.

Four files, only for a plan with a Kubernetes or k3s plane:
- Pulumi.yaml: the project, named after the plan; Python run by the pip toolchain from the virtual
  environment the operator activates. No `virtualenv:` option on purpose: a venv inside the bundle
  would be deleted by the next `orchgen plan` (it replaces the whole directory) and reported by
  `orchgen plan --check`.
- Pulumi.<plan.name>.yaml: the seed of the stack's config, `kubernetes:context` set to a placeholder
  that the program refuses, so nothing is installed before the operator names the cluster. The
  file is the operator's (`generator.bundle.OPERATOR_OWNED`): written only where the bundle has
  none, kept byte for byte by every later plan. orchgen owns no stack setting: everything it
  decides is in ../kubernetes, which the program reads, so there is nothing of orchgen's to keep in
  the stack's config and nothing of the operator's that a re-plan can clobber.
- requirements.txt and __main__.py: copied byte for byte from the package `generator.stacks`
  (stacks/ in the repository), which is the one place the program and its version pins live.
"""
from __future__ import annotations

from functools import cache
from importlib import resources

from ..decide.plan import Plan
from ..yamlio import dump_yaml

# The program (stacks/__main__.py) refuses this value; tests check that both spell it the same.
PLACEHOLDER_CONTEXT = "REPLACE-WITH-YOUR-KUBECONFIG-CONTEXT"


@cache
def stack_file(name: str) -> bytes:
    """A file of the package generator.stacks, as bytes (the program and its requirements)."""
    return resources.files("generator.stacks").joinpath(name).read_bytes()


def project(plan: Plan) -> dict[str, object]:
    plane = plan.kube_plane
    assert plane is not None
    return {
        "name": plan.name,
        "description": f"Installs the {plane.name} side of the orchgen bundle {plan.name}: "
                       "Helm releases and manifests of ../kubernetes",
        "runtime": {"name": "python", "options": {"toolchain": "pip"}},
    }


def stack_config() -> dict[str, object]:
    return {"config": {"kubernetes:context": PLACEHOLDER_CONTEXT}}


def render(plan: Plan) -> dict[str, bytes]:
    if plan.kube_plane is None:
        return {}
    return {
        "pulumi/Pulumi.yaml": dump_yaml(project(plan)),
        f"pulumi/Pulumi.{plan.name}.yaml": dump_yaml(stack_config()),
        "pulumi/requirements.txt": stack_file("requirements.txt"),
        "pulumi/__main__.py": stack_file("__main__.py"),
    }
