"""Every example bundle's README.md is held to the bundle beside it (issue 25): every bundle path it
names exists, every Kubernetes label or resource key it names is in the bundle's objects or
scripts, every command it gives runs a file that is there, and it is an ordered checklist per plane
(prerequisites, `orchgen validate`, install, checks, day two) before the reference material."""
from __future__ import annotations

import re

import pytest

from generator import spec
from generator.decide import make_plan
from generator.render import render

from .conftest import all_examples

TOP = ("slurm/", "kubernetes/", "pulumi/", "gitops/", "plan.json", "README.md")
# a path the README writes relative to kubernetes/ (`manifests/20-kueue.yaml`)
UNDER_KUBE = ("manifests/", "workloads/", "helm/")
PATH = re.compile(r"(?<![\w./$~-])((?:slurm|kubernetes|pulumi|gitops|manifests|workloads|helm)/[A-Za-z0-9_.{}<>/-]*"
                  r"|plan\.json)")
# a qualified Kubernetes key: a DNS prefix with a dot, '/', a name (labels, resources, taints)
KEY = re.compile(r"^([a-z0-9-]+(?:\.[a-z0-9-]+)+/[A-Za-z0-9._-]+)(?:[=:].*)?$")
# Keys the README names that are not the bundle's to hold, each for a reason a reader can check
NOT_IN_BUNDLE = {
    "helm.sh/resource-policy": "a chart's own CRD annotation (upstream), said to be absent at the pinned version",
    "kueue.x-k8s.io/queue-name": "the label a user sets to pick another LocalQueue they add",
    "kueue.x-k8s.io/pod-group-name": "the label a user sets on bare pods that must start together",
    "kueue.x-k8s.io/pod-group-total-count": "the annotation a user sets on bare pods that must start together",
    "kueue.x-k8s.io/admission": "the scheduling gate Kueue's pod integration puts on the pods it holds (upstream)",
    "kueue.x-k8s.io/podset-unconstrained-topology": "what Kueue implies for a pod set without a TAS annotation",
    "orchgen.io/plane": "in a non-hybrid plan: what a re-plan into a hybrid would add to the flavors",
    "topology.nebius.com/tier-N": "Soperator's label family, N a tier number (upstream)",
}
API_GROUP_VERSION = re.compile(r"/v[0-9]+((alpha|beta)[0-9]+)?$")


def bundles():
    """Every example, in each GitOps mode it plans in (argocd refuses KAI)."""
    from generator.errors import OrchgenError

    out = []
    for path in all_examples():
        fleet = spec.load(str(path))
        for mode in ("none", "kustomize", "argocd", "flux"):
            options = fleet.options.model_copy(update={"gitops": mode})
            try:
                files = render(make_plan(fleet.model_copy(update={"options": options}), str(path)))
            except OrchgenError:
                continue
            out.append(pytest.param(files, id=f"{path.stem}-{mode}"))
    return out


BUNDLES = bundles()


def spans(readme: str) -> list[str]:
    """The inline code spans and the lines of code blocks."""
    out = []
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", readme, re.S | re.M)
    for block in blocks:
        out += [line.split("#", 1)[0] for line in block.splitlines()]  # comments are prose
    prose = re.sub(r"^```[a-z]*\n.*?^```", "", readme, flags=re.S | re.M)
    out += re.findall(r"`([^`\n]+)`", prose)
    return out


def exists(files: dict[str, bytes], path: str) -> bool:
    path = path.rstrip(".,;:)")
    if path.startswith(UNDER_KUBE):
        path = "kubernetes/" + path
    if "{" in path or "<" in path:
        return True  # a placeholder of the reader's (`<release>.values.yaml`)
    if path in files:
        return True
    prefix = path.rstrip("/") + "/"
    return any(f.startswith(prefix) for f in files)


@pytest.mark.parametrize("files", BUNDLES)
def test_every_path_the_readme_names_is_in_the_bundle(files):
    readme = files["README.md"].decode()
    missing = sorted({p for span in spans(readme) for p in PATH.findall(span) if not exists(files, p)})
    assert not missing, missing


@pytest.mark.parametrize("files", BUNDLES)
def test_every_label_the_readme_names_is_in_the_objects(files):
    readme = files["README.md"].decode()
    body = b"\n".join(data for path, data in files.items() if path != "README.md").decode()
    keys = set()
    for span in spans(readme):
        for token in span.split():
            m = KEY.match(token.strip("`,;()'\""))
            if m and not API_GROUP_VERSION.search(m[1]) and "<" not in token:
                # `kubectl taint|label ... KEY-` removes KEY: the key is the name without its '-'
                keys.add(m[1][:-1] if m[1].endswith("-") else m[1])
    missing = sorted(k for k in keys if k not in body and k not in NOT_IN_BUNDLE)
    assert not missing, missing


COMMANDS = re.compile(r"^\s*(?:bash|sh|sbatch|source|\.)\s+(\S+)|(?:-f|-k|-r|--values)\s+(\S+)")


@pytest.mark.parametrize("files", BUNDLES)
def test_every_command_runs_a_file_that_is_there(files):
    readme = files["README.md"].decode()
    blocks = re.findall(r"^```(?:sh|bash|console)\n(.*?)^```", readme, re.S | re.M)
    missing = []
    cwd = ""
    for block in blocks:
        cwd = ""
        for line in block.splitlines():
            line = line.split("#", 1)[0]
            if m := re.match(r"^\s*cd\s+(\S+)", line):
                cwd = "" if m[1] in ("..", "-") else m[1].rstrip("/") + "/"
                continue
            for m in COMMANDS.finditer(line):
                arg = (m[1] or m[2]).strip("\"'")
                if arg.startswith(("/", "~", "$", "<", "http", "oci:")) or "<" in arg:
                    continue
                if not exists(files, cwd + arg) and not exists(files, arg):
                    missing.append(f"{line.strip()} ({cwd + arg})")
    assert not missing, missing


@pytest.mark.parametrize("files", BUNDLES)
def test_readme_is_an_ordered_checklist_per_plane(files):
    readme = files["README.md"].decode()
    heads = [h for h in re.findall(r"^## (.+)$", readme, re.M)]
    checklists = [h for h in heads if h.endswith(": checklist")]
    assert checklists, heads
    top = readme[readme.index("## Checklist\n"):readme.index("\n## ", readme.index("## Checklist\n"))]
    assert re.findall(r"^\*\*\[([^]]+)\]", top, re.M) == checklists, top
    reference = heads.index("Reference")
    assert all(heads.index(h) < reference for h in checklists)
    for head in checklists:
        start = readme.index(f"## {head}\n")
        end = readme.find("\n## ", start + 1)
        section = readme[start:end]
        steps = re.findall(r"^### ([0-9])\. (.+)$", section, re.M)
        assert [int(n) for n, _ in steps] == list(range(1, len(steps) + 1)), steps
        titles = " | ".join(t for _, t in steps).lower()
        order = [titles.find(word) for word in ("prerequisites", "validate", "install", "check", "day two")]
        assert -1 not in order and order == sorted(order), titles
        assert "orchgen validate ." in section


def _slug(heading: str, seen: dict[str, int]) -> str:
    """GitHub's heading anchor (github-slugger, as github.com renders README.md): lower case; every character
    but letters, digits, '-', '_' and space dropped; spaces to '-'; the n-th repeat of a slug gets '-n'."""
    slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
    n = seen.get(slug, 0)
    seen[slug] = n + 1
    return f"{slug}-{n}" if n else slug


@pytest.mark.parametrize("files", BUNDLES)
def test_readme_starts_with_a_one_screen_checklist_whose_links_land(files):
    """Issue 39: the bundle README opens with a checklist of at most one screen (40 lines, the title and
    the do-not-edit note included) whose every link is a heading below, each plane's steps in order."""
    readme = files["README.md"].decode()
    lines = readme.splitlines()
    start = lines.index("## Checklist")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("## "))
    assert end <= 40, f"{end} lines before the first section after the checklist"
    text, fenced, seen, anchors = "\n".join(lines[start:end]), False, {}, []
    for line in lines:
        fenced = fenced != line.startswith("```")
        if not fenced and re.match(r"#{1,6} ", line):
            anchors.append(_slug(line.split(" ", 1)[1].strip(), seen))
    links = re.findall(r"\]\(#([^)]+)\)", text)
    assert links and all(link in anchors for link in links), sorted(set(links) - set(anchors))
    steps = re.findall(r"^- \[ \] \[(\d)\. ", text, re.M)
    assert steps and "".join(steps).replace("12345", "") == "", steps  # each plane: 1 to 5, in order
    assert "Reference: " in text
