"""The package layout the code promises: no import circle anywhere in generator/, the input side
never imports the decision, the decision never imports a renderer, and every module imports on
its own in a fresh interpreter.

The graph counts every `import` / `from ... import` in a module, at top level or inside a function
(a lazy import is still a dependency), resolved to the module it names: `from . import slinky`
is an edge to the module `slinky`, `from .plan import Plan` to the module `plan`.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "generator"

# Which top-level parts of generator/ each part may import (besides itself and the base modules).
BASE = {"errors", "catalog", "yamlio", "schedulers", "providers", "contract",  # data every part reads
        "labels_script"}  # node-labels.sh's fixed text (render writes it, validate compares with it)
LAYERS = {
    "spec": set(),
    "decide": {"spec"},
    "render": {"spec", "decide"},
    "impact": {"spec", "bundle"},  # reads two bundles' files (hostlists, the bundle marker)
    "validate": {"spec", "decide", "render", "bundle", "impact"},
}
# Single modules a part may import beyond its layers: the bring-up ships generator/impact/slurm.py byte for byte
# (bringup/slurm_impact.py, standard library only), and its renderer reads the same table's upgrade window for
# vars.yaml's guard (issue 33), so the window has one source
MODULES_ALLOWED = {"render": {"generator.impact.slurm"}}


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def imports_of(name: str) -> set[str]:
    """The generator modules `name` imports, resolved as Python would."""
    tree = ast.parse(MODULES[name].read_text(), str(MODULES[name]))
    here = name.split(".") if _is_package(name) else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "generator"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "generator":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in MODULES else target)
    return {m for m in out if m in MODULES and m != name}


GRAPH = {name: imports_of(name) for name in MODULES}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_walker_sees_imports():
    """Guards the guard: the walker resolves relative and lazy imports, and finds a planted cycle."""
    assert "generator.decide.plan" in GRAPH["generator.decide.planner"]
    assert "generator.spec.checks" in GRAPH["generator.spec.load"]
    assert "generator.render.kubernetes.slurm_values" in GRAPH["generator.render"]  # a lazy import
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_circle_in_generator():
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def _part(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


@pytest.mark.parametrize("part", sorted(LAYERS))
def test_each_part_imports_only_what_its_docstring_allows(part):
    allowed = LAYERS[part] | BASE | {part}
    wrong = sorted(f"{m} imports {t}" for m in MODULES if _part(m) == part
                   for t in GRAPH[m] if _part(t) not in allowed and t not in MODULES_ALLOWED.get(part, ()))
    assert not wrong, wrong


@pytest.mark.parametrize("package", [m for m in MODULES if _is_package(m)])
def test_every_package_says_what_it_owns_and_may_import(package):
    doc = ast.get_docstring(ast.parse(MODULES[package].read_text())) or ""
    assert doc, f"{package} has no docstring"
    if package.count(".") == 1 and package.split(".")[1] in LAYERS:
        assert "import" in doc, f"{package}'s docstring does not say what it may import"


def test_every_module_imports_on_its_own():
    """In a fresh interpreter each, so an order-dependent import circle cannot hide."""
    def load(name: str) -> tuple[str, str]:
        done = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True,
                              cwd=ROOT)
        return name, done.stderr.strip().splitlines()[-1] if done.returncode else ""

    names = [m for m in MODULES if not m.startswith(("generator.templates", "generator.stacks"))]
    with ThreadPoolExecutor(max_workers=4) as pool:
        failed = [f"{n}: {err}" for n, err in pool.map(load, names) if err]
    assert not failed, failed


def test_render_mirrors_the_bundle():
    """A reader finds the code of a bundle directory by its path."""
    render = PACKAGE / "render"
    for folder in ("slurm", "kubernetes", "gitops", "bringup", "clusters"):
        assert (render / folder / "__init__.py").is_file(), folder
    for module in ("pulumi.py", "report.py"):
        assert (render / module).is_file(), module
    flat = sorted(p.name for p in render.glob("*.py"))
    assert flat == ["__init__.py", "pulumi.py", "report.py", "templating.py"], flat
