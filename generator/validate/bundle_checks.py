"""`orchgen validate`: every check of a bundle on disk, as one report of `path:line: message` findings.
With `--against OLD`, also what applying the bundle over OLD changes (`Report.replan`) and the updates
the API server would refuse (generator.validate.replan). A multi-cluster bundle: every check also
runs on each clusters/<name>/ (generator.validate.clusters), and `--against` compares cluster by cluster.

The bundle may be ours or hand-edited. CRDs and chart defaults come only from directories the user
names (nothing here needs orchgen's reference data); a check whose input is missing is skipped with
a notice, which is not an error. Usage problems (no such directory, not a bundle, unreadable CRDs)
raise `OrchgenError`; everything wrong inside the bundle is a finding.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..contract import CLUSTERS_DIR
from ..errors import OrchgenError
from . import clusters as cluster_checks, consumer_checks, cross_checks, helm_checks, kube_checks, kube_refs, replan, secrets_check, slinky_checks, slurm_checks
from .bundle_view import Bundle, Finding, error

if TYPE_CHECKING:
    from .crds import CRDRegistry

BUNDLE_MARKS = ("plan.json", "slurm", "kubernetes", "gitops")


@dataclass
class Report:
    root: str
    findings: list[Finding] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    files: int = 0
    replan: list[str] = field(default_factory=list)  # with --against: what the re-plan changes

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    def summary(self) -> str:
        e, w = len(self.errors), len(self.warnings)
        verdict = "ok" if not e else f"{e} error{'s' * (e != 1)}"
        extra = f", {w} warning{'s' * (w != 1)}" if w else ""
        skipped = f"; {len(self.notices)} check(s) skipped" if self.notices else ""
        return f"{self.root}: {verdict}{extra} ({self.files} files checked{skipped})"


def load_crds(paths: str | Path | Iterable[str | Path]) -> CRDRegistry:
    """The CRDs under a user's directories (recursively); a bad directory is a usage error."""
    from .crds import CRDRegistry

    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    registry = CRDRegistry()
    for path in paths:
        try:
            found = CRDRegistry.from_dir(path)
            for crd_version in found:
                registry.add(crd_version)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise OrchgenError(f"cannot load CRDs: {exc}", str(path), field="--crds") from None
        if not len(found):
            raise OrchgenError("holds no CustomResourceDefinition", str(path), field="--crds")
    return registry


def bundle_releases(path: str | Path, allowed: tuple[str, ...] = ()) -> list[dict]:
    """The releases a bundle pins (kubernetes/helm/releases.yaml), [] where it has none. Before any
    chart is fetched: a chart name or version that is not Helm's grammar, or a repository other than
    the one orchgen's catalog pins for the chart (and not in `allowed`, the user's --allow-repo), is
    an OrchgenError naming the file, line and field."""
    from .helm_checks import load_releases

    bundle = open_bundle(path)
    out: list[dict] = []
    for view in [bundle, *cluster_checks.views(bundle)]:  # a plane beyond one cluster: every cluster's releases
        releases, doc = load_releases(view)
        for rel in releases:
            _check_pin(view, doc, rel, allowed)
        out += [r for r in releases if r not in out]
    return out


def _check_pin(view: Bundle, doc, rel: dict, allowed: tuple[str, ...]) -> None:  # noqa: ANN001
    from ..contract import RELEASES_FILE as RELEASES
    from . import charts

    repo, chart, version = (rel.get(k) for k in ("repo", "chart", "version"))
    if not all(isinstance(v, str) and v for v in (repo, chart, version)):
        return  # nothing is fetched for it (check_releases reports the missing field)
    index = next(i for i, r in enumerate(doc.data["releases"]) if r is rel)
    prefix = getattr(view, "prefix", "")

    def refuse(key: str, why: str) -> OrchgenError:
        return OrchgenError(why, f"{prefix}{RELEASES}", doc.line_of(["releases", index, key]),
                            f"releases[{index}].{key}")

    problem = charts.pin_problem(chart, version)
    if problem:
        raise refuse(*problem)
    why = charts.repo_problem(repo)
    if why:
        raise refuse("repo", why)
    if not charts.repo_allowed(charts.Pin(repo, chart, version), allowed):
        pinned = ", ".join(sorted(charts.catalog_repos(chart))) or "none: not a chart orchgen's catalog knows"
        raise refuse("repo", f"{repo} is not the repository orchgen's catalog pins for chart {chart} ({pinned}); "
                             "`orchgen validate` fetches only from it, or from a repository given with --allow-repo")


def chart_defaults_dir(path: str | Path) -> Path:
    path = Path(path)
    if not path.is_dir():
        raise OrchgenError("is not a directory", str(path), field="--chart-defaults")
    return path


def open_bundle(path: str | Path, option: str | None = None) -> Bundle:
    """The bundle at `path` (`option` names the command-line option it came from, for messages)."""
    root = Path(path)
    if not root.is_dir():
        raise OrchgenError("no such bundle directory" if not root.exists() else "is not a directory", str(root),
                           field=option)
    try:
        present = [m for m in BUNDLE_MARKS if (root / m).exists()]
        bundle = Bundle(root)
    except OSError as exc:
        raise OrchgenError(f"cannot read the bundle: {exc.strerror}", str(root), field=option) from None
    if not present:
        raise OrchgenError("is not an orchgen bundle (no plan.json, slurm/, kubernetes/ or gitops/)", str(root),
                           field=option)
    return bundle


def validate_bundle(path: str | Path, crds: CRDRegistry | None = None,
                    chart_defaults: Path | None = None, against: str | Path | None = None) -> Report:
    from .crds import CRDLoadError

    bundle = open_bundle(path)
    old = open_bundle(against, "--against") if against is not None else None
    report = Report(str(path), files=len(bundle.files))
    if bundle.ignored:
        shown = ", ".join(bundle.ignored[:3]) + (f" and {len(bundle.ignored) - 3} more" if len(bundle.ignored) > 3 else "")
        report.notices.append(f"ignored {len(bundle.ignored)} file(s) no tool reads (byte code, editor "
                              f"backups): {shown}")
    try:
        found = _findings(bundle, crds, chart_defaults, report)
        found += _clusters(bundle, crds, chart_defaults, report)
        if old is not None:
            found += _against(bundle, old, str(against), crds, report)
    except CRDLoadError as exc:  # a CRD's schema is parsed when first needed: still the user's --crds
        raise OrchgenError(f"cannot load CRDs: {exc}", field="--crds") from None
    _ = bundle.plan  # a broken plan.json is a finding even if no check needed it
    report.findings = sorted(set(found + bundle.problems), key=lambda f: (f.path, f.line, f.message))
    return report


def _clusters(bundle: Bundle, crds: CRDRegistry | None, chart_defaults: Path | None, report: Report) -> list[Finding]:
    """A plane beyond one cluster: every check of a single cluster's kubernetes/ and pulumi/, run on
    each clusters/<name>/ (generator/validate/clusters.py), findings named under that folder."""
    if not cluster_checks.is_multi(bundle):
        return []
    views = cluster_checks.views(bundle)
    found = list(cluster_checks.check_layout(bundle, [v.name for v in views]))
    for view in views:
        notices: list[str] = []
        sub = Report(str(view.root))
        sub.notices = notices
        found += [view.lift(f) for f in _findings(view, crds, chart_defaults, sub, secrets=False) + view.problems]
        report.notices += [n for n in notices if n not in report.notices]
    return found


def _findings(bundle: Bundle, crds: CRDRegistry | None, chart_defaults: Path | None, report: Report,
              secrets: bool = True) -> list[Finding]:
    notices = report.notices
    if crds is None and bundle.under("kubernetes/") + bundle.under("gitops/"):
        notices.append("no --crds: custom resources not checked against CRD schemas")
    consumer_checks.start_scripts(bundle)  # bash -n and shellcheck run beside the checks below
    found: list[Finding] = []
    found += slurm_checks.check(bundle, notices)
    docs = kube_checks.objects(bundle)
    found += kube_checks.check_shapes(docs)
    objs = [d for d in docs if isinstance(d.data, dict)]
    found += kube_checks.check_schemas(objs, kube_checks.kubernetes_version(bundle), crds, notices)
    found += kube_checks.check_rules(objs, crds)
    found += kube_checks.check_scope(objs, crds)
    found += kube_checks.check_duplicates(objs)
    found += helm_checks.check_releases(bundle)
    found += kube_checks.check_crd_owners(objs, bundle)
    found += helm_checks.check_values(bundle, chart_defaults, notices)
    found += helm_checks.check_gitops_values(objs, bundle)
    found += helm_checks.check_kustomizations(bundle)
    found += kube_refs.check_queues(objs)
    if any(d.path.startswith("kubernetes/") for d in objs):
        found += kube_refs.check_node_labels(bundle, objs)
    found += slinky_checks.check(bundle)
    found += cross_checks.check(bundle, objs)
    found += _secrets(bundle) if secrets else []  # a cluster's files are the whole bundle's, scanned once
    found += consumer_checks.check(bundle, objs)
    return found


def _against(bundle: Bundle, old: Bundle, old_root: str, crds: CRDRegistry | None, report: Report) -> list[Finding]:
    report.replan = replan.summarize(bundle, old).lines(old_root)
    from ..impact.bundle import against_lines  # issue 23: both planes' impact classes

    multi = cluster_checks.is_multi(bundle) or cluster_checks.is_multi(old)
    report.replan += against_lines(old.root, bundle.root, old_root,
                                   exclude=(f"{CLUSTERS_DIR}/",) if multi else ())
    found = list(replan.check_updates(bundle, old, crds)) if crds is not None else []
    if multi:
        found += _against_clusters(bundle, old, old_root, crds, report)
    if crds is None:
        report.notices.append("no --crds: updates not checked against the CRDs' transition rules")
    # OLD's broken files are not this bundle's errors, but their objects were left out of the comparison
    report.notices += [f"--against: {old_root}/{p.path}:{p.line}: {p.message}; its objects not compared"
                       for p in old.problems]
    return found


def _against_clusters(bundle: Bundle, old: Bundle, old_root: str, crds: CRDRegistry | None,
                      report: Report) -> list[Finding]:
    """A plane beyond one cluster, re-planned: each cluster compared with the same cluster of OLD
    (the summary, the impact and the CRDs' transition rules, as for a single cluster). A cluster only
    OLD has is deleted whole (every object and release of it listed as deleted: its jobs stop, and
    the manager's MultiKueueConfig no longer lists it); one only BUNDLE has is created whole."""
    from ..impact.bundle import against_lines

    new_names, old_names = set(cluster_checks.on_disk(bundle)), set(cluster_checks.on_disk(old))
    found: list[Finding] = []
    for name in sorted(new_names | old_names):
        now, before = cluster_checks.ClusterView(bundle, name), cluster_checks.ClusterView(old, name)
        label = f"{old_root}/{cluster_checks.cluster_dir(name)}"
        if name not in old_names:
            report.replan.append(f"cluster {name}: created (not in {old_root}): every object and release below is new")
        elif name not in new_names:
            report.replan.append(f"cluster {name}: deleted (only in {old_root}): every object and release below goes "
                                 "with it; drain its jobs first, and remove the cluster itself once MultiKueue no "
                                 "longer lists it")
        report.replan += [f"cluster {name}: {line}" for line in replan.summarize(now, before).lines(label)]
        report.replan += [f"cluster {name}: {line}" for line in against_lines(before.root, now.root, label)]
        if crds is not None and name in new_names & old_names:
            found += [now.lift(f) for f in replan.check_updates(now, before, crds)]
        report.notices += [f"--against: {label}/{p.path}:{p.line}: {p.message}; its objects not compared"
                           for p in before.problems]
    return found


def _secrets(bundle: Bundle) -> list[Finding]:
    out = []
    for path in bundle.files:
        text = bundle.text(path)
        for line, what in secrets_check.scan(text or ""):
            out.append(error(path, line, f"looks like {what}: reference secrets (a Secret name, a README "
                                         "step), never write them into the bundle"))
    return out
