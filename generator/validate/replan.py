"""`orchgen validate BUNDLE --against OLD`: what applying BUNDLE over OLD changes, and which of those
updates the API server would refuse.

Objects are matched by identity, (API group, kind, namespace, name), as the API server matches them
(the version may differ between the bundles). The summary lists the objects of kubernetes/manifests
and kubernetes/workloads created, changed and deleted, and the Helm releases of OLD's releases.yaml
that BUNDLE no longer installs, with the CRD groups each owned (uninstalling a release leaves its CRDs,
and objects of theirs, behind). Every custom resource in both bundles (GitOps objects included) is
checked as an UPDATE against its CRD's transition rules (`oldSelf`); each refusal is an error finding.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .bundle_view import Bundle, Doc, Finding, as_list, error
from .helm_checks import load_releases
from .kube_checks import group_of, objects

if TYPE_CHECKING:
    from .crds import CRDRegistry

SUMMARY_DIRS = ("kubernetes/prerequisites/", "kubernetes/manifests/", "kubernetes/operator-resources/",
                "kubernetes/workloads/")
Identity = tuple[str, str, str | None, str]


@dataclass
class Replan:
    created: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    releases_removed: list[str] = field(default_factory=list)

    def lines(self, old_root: str) -> list[str]:
        head = (f"re-plan from {old_root}: {len(self.created)} created, {len(self.changed)} changed, "
                f"{len(self.deleted)} deleted; {len(self.releases_removed)} Helm release(s) removed")
        return [head] + [f"  {verb}: {what}" for verb, items in (
            ("created", self.created), ("changed", self.changed), ("deleted", self.deleted),
            ("release removed", self.releases_removed)) for what in items]


def identity(doc: Doc) -> Identity:
    return group_of(doc.api_version), doc.kind, doc.namespace, doc.name


def _named(doc: Doc) -> str:
    return f"{doc.kind} {doc.namespace}/{doc.name}" if doc.namespace else f"{doc.kind} {doc.name}"


def _by_identity(docs: list[Doc]) -> dict[Identity, Doc]:
    out: dict[Identity, Doc] = {}
    for doc in docs:
        if isinstance(doc.data, dict) and doc.kind and doc.name:
            out.setdefault(identity(doc), doc)  # a second definition is check_duplicates' finding
    return out


def summarize(new: Bundle, old: Bundle) -> Replan:
    def in_summary(bundle: Bundle) -> dict[Identity, Doc]:
        return _by_identity([d for d in objects(bundle) if d.path.startswith(SUMMARY_DIRS)])

    now, before = in_summary(new), in_summary(old)
    out = Replan(created=[_named(now[k]) for k in sorted(now.keys() - before.keys(), key=str)],
                 deleted=[_named(before[k]) for k in sorted(before.keys() - now.keys(), key=str)],
                 changed=[_named(now[k]) for k in sorted(now.keys() & before.keys(), key=str)
                          if now[k].data != before[k].data])
    kept = {(r.get("name"), r.get("namespace")) for r in load_releases(new)[0]}
    for rel in load_releases(old)[0]:
        if (rel.get("name"), rel.get("namespace")) not in kept:
            groups = ", ".join(str(g) for g in as_list(rel.get("crds"))) or "none"
            out.releases_removed.append(f"{rel.get('name')} ({rel.get('namespace')}), owner of the CRDs of {groups}")
    return out


def check_updates(new: Bundle, old: Bundle, registry: CRDRegistry) -> Iterator[Finding]:
    """The transition rules of every custom resource that both bundles define."""
    before = _by_identity(objects(old))
    for key, doc in _by_identity(objects(new)).items():
        crd = registry.get(doc.api_version, doc.kind)
        if crd is None or key not in before:
            continue
        for violation in crd.cel.check_update(doc.data, before[key].data).violations:
            yield error(doc.path, doc.line_of(list(violation.path)),
                        f"{doc.label}: the API server would reject this update: "
                        f"{str(violation).removeprefix('(root): ')}")
