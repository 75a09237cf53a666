"""spec.load composes workload.yaml with libyaml where it agrees with PyYAML's pure-Python composer, and
leaves every other text to PyYAML (issue 41): the same nodes, tags, values and lines either way."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from generator.spec.load import _compose_c

REPO = Path(__file__).resolve().parent.parent


def _tree(node):
    """What spec.load reads of a node: its kind, tag, value and line (libyaml and PyYAML set `style` apart)."""
    if node is None:
        return None
    base = (type(node).__name__, node.tag, node.start_mark.line)
    if isinstance(node, yaml.ScalarNode):
        return base + (node.value,)
    if isinstance(node, yaml.SequenceNode):
        return base + tuple(_tree(n) for n in node.value)
    return base + tuple((_tree(k), _tree(v)) for k, v in node.value)


def _pure(text: str) -> list:
    return [_tree(n) for n in yaml.compose_all(text, Loader=yaml.SafeLoader)]


EXAMPLES = sorted(REPO.glob("examples/**/*.yaml"))
# the examples holding a character left to PyYAML ('>' in a comment), which the test reads through it
PYYAML_EXAMPLES = {"multicluster/kubernetes-128k.yaml"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.relative_to(REPO / "examples").as_posix())
def test_examples_agree(path: Path) -> None:
    text = path.read_text()
    nodes = _compose_c(text)
    if path.relative_to(REPO / "examples").as_posix() in PYYAML_EXAMPLES:
        assert nodes is None
        return
    assert nodes is not None, "a plain example takes libyaml's composer"
    assert [_tree(n) for n in nodes] == _pure(text)


def test_benchmark_fleet_takes_libyaml() -> None:
    """benchmarks/bench.py's synthetic fleets, the ones issue 41's targets are about."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from bench import fleet
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    for nodes in (8, 2048, 16384):
        text = yaml.safe_dump(fleet(nodes))
        composed = _compose_c(text)
        assert composed is not None and [_tree(n) for n in composed] == _pure(text)


# Where the two composers were seen to disagree (differential runs over the repository's YAML and mutations
# of it): each must be left to PyYAML. Every one is accepted, or read otherwise, by libyaml.
DISAGREE = {
    "tab": "a:\t1\n",  # PyYAML refuses a tab where libyaml takes it as white space
    "question mark in a flow mapping": "a: {b: ibp?2s0, c: 1}\n",
    "block scalar header": "a: |#\n  x\n",
    "no newline at the end": "---\n#",  # the empty document's line: 1 (PyYAML) or 2 (libyaml)
}


@pytest.mark.parametrize("text", DISAGREE.values(), ids=DISAGREE.keys())
def test_where_they_disagree_pyyaml_composes(text: str) -> None:
    assert _compose_c(text) is None
    c_nodes = None
    try:
        c_nodes = [_tree(n) for n in yaml.compose_all(text, Loader=yaml.CSafeLoader)]
    except yaml.YAMLError:
        pass
    try:
        pure = _pure(text)
    except yaml.YAMLError:
        pure = None
    assert c_nodes != pure, "libyaml now agrees here: the case no longer shows why the text is left to PyYAML"


def test_a_libyaml_refusal_is_left_to_pyyaml() -> None:
    assert _compose_c("a: [1, 2\n") is None  # PyYAML composes it again and its error is the one printed


def test_deep_nesting_never_reaches_libyaml() -> None:
    """libyaml composes recursively in C without a limit: 100,000 levels crash the interpreter (SIGSEGV). The
    text is left to PyYAML, whose RecursionError spec.load turns into its one-line error (exit 2). In a
    subprocess: were it given to libyaml, the crash fails this test, not the test run."""
    deep = "a: " + "[" * 100_000 + "]" * 100_000 + "\n"
    code = ("import sys; from generator.spec.load import _compose_c; "
            "print(_compose_c(sys.stdin.read()) is None)")
    out = subprocess.run([sys.executable, "-c", code], input=deep, capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0 and out.stdout.strip() == "True", out
