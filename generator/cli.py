"""The orchgen command line: commands and exit codes only, no logic.

Exit codes: 0 ok; 1 differences (`plan --check`) or findings (`validate`); 2 bad input or a
refused operation, always as one line on stderr naming file, line and field.
"""
from __future__ import annotations

import errno
import io
import json
import os
import sys
from pathlib import Path

import click

from . import providers
from .errors import Exit, OrchgenError, cut, fit_to_print
from .starter import BRINGUP_OS_SLURM, DEFAULT_OS
from .terminal import echo as fit_echo

MAX_LINE = 2_000  # characters of one line orchgen prints about the input

# --input-root: a folder besides workload.yaml's own that files named in it may be read from
_INPUT_ROOT = click.option(
    "--input-root", "input_roots", multiple=True, type=click.Path(file_okay=False, path_type=str),
    help="also read files workload.yaml names (fabric.from) from this folder; by default only the "
    "folder of workload.yaml is allowed (repeatable)")


class _Format(click.Choice):
    """`--format text|json`, spelt the same on every command that prints results. `table`, the old name of
    text on recommend and simulate, is still accepted (for one release) and means text."""

    def __init__(self) -> None:
        super().__init__(["text", "json", "table"])

    def get_metavar(self, *args, **kwargs) -> str:
        return "[text|json]"

    def convert(self, value, param, ctx):
        value = super().convert(value, param, ctx)
        return "text" if value == "table" else value


def _format(help_: str):
    return click.option("--format", "fmt", type=_Format(), default="text", show_default=True,
                        help=f"{help_} (`table`, the old name of text, is accepted until the next release)")


def _planned(fleet, path: str, previous: dict[str, str] | None = None):
    """make_plan, plus the warnings of the loader's version checks (spec.inputs): a Slurm,
    Kubernetes or chart version orchgen does not know plans, with a warning (an error under strict)."""
    from dataclasses import replace

    from .decide import make_plan
    from .decide.plan import Warning_
    from .spec.inputs import version_warnings
    from .spec.platforms import fact_warnings

    plan = make_plan(fleet, path, previous)
    extra = tuple(Warning_(message, field) for message, field in version_warnings(fleet))
    # what the bundle guesses about the nodes (spec/platforms.py): after the plan's own, bundle only
    guessed = tuple(Warning_(message, field, bundle_only=True) for message, field in fact_warnings(fleet, plan))
    return replace(plan, warnings=extra + plan.warnings + guessed) if extra or guessed else plan


def _load_plan(path: str, gitops: str | None = None, render: bool = False, roots: tuple[str, ...] = (),
               warnings: list | None = None, previous: Path | None = None):
    """The plan (and with `render`, the bundle's files) of a workload.yaml. An error the planner or
    a renderer raises about a field is pointed at that field's line in the file. With `warnings`,
    the warning lines are appended there instead of printed (`plan` prints them after its listing).
    `previous`: the bundle folder the plan replaces, whose nodes keep their planes (issue 36)."""
    from . import spec

    fleet, locate = spec.load_located(path, roots)
    if gitops:
        fleet = fleet.model_copy(update={"options": fleet.options.model_copy(update={"gitops": gitops})})
    kept = planes_of_bundle(previous, fleet.metadata.name) if previous is not None else None
    try:
        plan = _planned(fleet, path, kept)
        if not render:
            _warn(plan, locate, bundle=False, out=warnings)
            return plan, None
        from .render import render as render_files

        files = render_files(plan)
        _warn(plan, locate, bundle=True, out=warnings)  # after rendering: a refusal there is the one line printed
        return plan, files
    except OrchgenError as err:
        raise locate(err) from None


def planes_of_bundle(root: str | Path, fleet: str) -> dict[str, str]:
    """node -> plane, from the plan.json of the bundle in `root`, read as every bundle file is
    (bundle.read_inside); {} when there is none of `fleet` (absent, unreadable, not JSON)."""
    from .bundle import read_inside
    from .spec.planes import planes_of_document

    try:
        doc = json.loads(read_inside(root, "plan.json"))
    except Exception:  # noqa: BLE001 - no previous bundle of this fleet to keep: the fresh split
        return {}
    return planes_of_document(doc, fleet)


def _warn(plan, locate, bundle: bool, out: list | None = None) -> None:
    """Each warning as one stderr line naming file:line: field (appended to `out` when given);
    under options.strict the first one refuses the plan instead (exit 2, nothing written). Warnings
    about the bundle's placeholders only when a bundle is written (`recommend` needs no fleet.slurm)."""
    for warning in plan.warnings:
        if warning.bundle_only and not bundle:
            continue
        err = locate(OrchgenError(warning.message, None, None, warning.field))
        if plan.strict:
            err.message += " (options.strict: true refuses what would otherwise be a warning)"
            raise err
        line = f"orchgen: warning: {err}"
        if out is None:
            click.echo(line, err=True)
        else:
            out.append(line)


def _few_collections() -> None:
    """A plan allocates millions of short-lived objects (pydantic's schemas, the bundle's text) and leaves
    almost no cyclic garbage (1,654 objects at 131,072 GPUs): CPython's default thresholds spent 0.07-0.17 s,
    15-20% of a plan, in ~110-165 collections that freed nothing worth it, one a full pass over the heap
    (issue 41). Collections stay on for a pathological input, just 100x rarer (peak RSS unchanged)."""
    import gc

    gc.set_threshold(100_000, 50, 100)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="orchgen")
def cli() -> None:
    """Pick the control plane for a GPU fleet and write the bundle real tools consume."""


@cli.command()
@click.argument("workload", type=click.Path(dir_okay=True, path_type=str))
@_format("text, or JSON: the decisions, reasons and add-ons per workload and for the fleet")
@click.option("--simulate", "sim", is_flag=True, help="also quote `orchgen simulate --compare`'s figures: "
              "queue wait p50/p95 and GPU utilization for the plan and its alternatives (replays the demand)")
@click.option("--seed", type=int, default=0, show_default=True, help="with --simulate: seed of the demand's draws")
@click.option("--hours", type=click.FloatRange(min=0.01, max=24 * 366), default=168.0, show_default=True,
              help="with --simulate: hours of arrivals drawn from the demand")
@click.option("--previous", "previous_dir", metavar="BUNDLE", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="the bundle the site runs: each node keeps the plane it has there (as `plan -o` "
              "over it does)")
@_INPUT_ROOT
def recommend(workload: str, fmt: str, sim: bool, seed: int, hours: float, previous_dir: Path | None,
              input_roots: tuple[str, ...]) -> None:
    """Show the plane, add-ons and reasons per workload and for the fleet. A fleet that cannot be
    planned still gets its per-workload decisions (they do not depend on the split), then the error.
    With --simulate, the simulated queue waits and GPU utilization of the plan and its alternatives."""
    from . import spec
    from .decide import per_workload

    fleet, locate = spec.load_located(workload, input_roots)
    kept = planes_of_bundle(previous_dir, fleet.metadata.name) if previous_dir is not None else None
    try:
        plan = _planned(fleet, workload, kept)
        from .render import render as render_files

        render_files(plan)  # what `plan` refuses while writing the bundle, recommend refuses too
        _warn(plan, locate, bundle=False)
    except OrchgenError as err:
        _show_workloads(per_workload(fleet), fmt, fleet.metadata.name)
        raise locate(err) from None
    try:  # before a line is printed: a simulation refused (too many jobs) is the only output
        rows = _simulated(fleet, plan, workload, seed, hours) if sim else []
    except OrchgenError as err:
        raise locate(err) from None
    if fmt == "json":
        data = plan.to_json()
        out = {
            "fleet": {k: data[k] for k in ("name", "hybrid", "gang_scheduler", "reasons")}
            | {"planes": {n: {k: p[k] for k in ("host", "operator", "node_count", "gpus", "addons")}
                          for n, p in data["planes"].items()}},
            "workloads": [w.recommendation() for w in plan.workloads],
        }
        if sim:
            from .simulate.command import tradeoff

            out["simulate"] = {"seed": seed, "hours": hours, "variants": rows, "tradeoff": tradeoff(rows)}
        click.echo(json.dumps(out, indent=2))
        return
    console = _show_workloads(plan.workloads, fmt, plan.name)
    from rich.text import Text

    from .recommend_view import hanging

    console.print(f"[bold]{plan.name}: fleet[/bold]")
    for name, p in plan.planes.items():
        host = f" on Kubernetes ({p.operator})" if p.operator else ""
        console.print(Text(hanging(f"  {name}{host}: {_nodes(len(p.nodes))}; add-ons: {', '.join(p.addons) or '-'}",
                                   console.width, 4)))
    for line in plan.reasons:
        console.print(Text(hanging(f"  - {line}", console.width, 4)))
    if sim:
        from .simulate.command import brief

        console.print(Text(hanging(f"{plan.name}: simulated ({hours:g} h of demand, seed {seed}; the table: "
                                   f"orchgen simulate --compare --seed {seed}{'' if hours == 168 else f' --hours {hours:g}'})",
                                   console.width, 4), style="bold"))
        for line in brief(rows):
            console.print(Text(hanging(f"  {line}", console.width, 4)))
        from .simulate.command import tradeoff

        for line in tradeoff(rows):  # the plan beside the fleet-level choice it turned down
            console.print(Text(hanging(f"  {line}", console.width, 4)))


def _nodes(n: int) -> str:
    return f"{n} node{'' if n == 1 else 's'}"


def _simulated(fleet, plan, workload: str, seed: int, hours: float) -> list[dict]:
    """`recommend --simulate`: simulate --compare's reports, without the per-job detail."""
    from .simulate.command import compare_variants

    return compare_variants(fleet, plan, workload, None, hours, seed)


def _show_workloads(workloads, fmt: str, name: str):
    """The per-workload table; in JSON only when the fleet failed (`fleet` is then null)."""
    if fmt == "json":
        click.echo(json.dumps({"fleet": None, "workloads": [w.recommendation() for w in workloads]}, indent=2))
        return None
    from .recommend_view import workloads_view
    from .terminal import console as make_console

    console = make_console()  # the terminal's width (COLUMNS; 80 when not a terminal); NO_COLOR honoured
    console.print(workloads_view(workloads, name, console.width))
    return console


@cli.command()
@click.argument("workload", type=click.Path(dir_okay=True, path_type=str))
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("out"), show_default=True,
              help="bundle directory")
@click.option("--check", is_flag=True, help="write nothing; exit 1 if the directory differs")
@click.option("--force", is_flag=True, help="replace the bundle of another fleet (never a file orchgen did not write)")
@click.option("--gitops", type=click.Choice(["none", "kustomize", "argocd", "flux"]), default=None,
              help="override options.gitops")
@click.option("--diff", "show_diff", is_flag=True,
              help="write nothing; print each file's diff against the directory and what each change does to "
                   "the running site; exit 1 if anything would change")
@_format("text, or JSON for CI: what was written; with --check the differences; with --diff the impact")
@click.option("--charts", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="with --diff: unpacked Helm charts (<chart>/<version>/) to render for rollouts "
                   "(default: $ORCHGEN_CHARTS)")
@click.option("-q", "--quiet", is_flag=True, help="no file listing: one summary line, warnings and the next step")
@_INPUT_ROOT
def plan(workload: str, output: Path, check: bool, force: bool, gitops: str | None, show_diff: bool,
         fmt: str, charts: Path | None, quiet: bool, input_roots: tuple[str, ...]) -> None:
    """Decide and write the bundle (atomically, byte-identical for the same input)."""
    _few_collections()
    from . import bundle
    from .plan_output import listing, next_steps, rule_of, workload_lines

    warnings: list[str] = []
    # the bundle being replaced: its nodes keep their planes (a move is the input's, and --diff shows it)
    the_plan, files = _load_plan(workload, gitops, render=True, roots=input_roots, warnings=warnings,
                                 previous=output)
    if show_diff:
        from .impact.bundle import compare, read_tree
        from .impact.kube import charts_dir

        for line in warnings:
            click.echo(line, err=True)
        skip = lambda p: p == bundle.MARKER or bundle.operator_owned(p)  # noqa: E731 - as --check
        ours = {p: d for p, d in files.items() if not skip(p)}
        impact = compare(read_tree(output, skip), ours, str(output), "new", charts_dir(charts))
        if fmt == "json":
            click.echo(impact.to_json())  # nothing to change: the same document, its lists empty
        elif impact:
            from .terminal import fit_diff

            for line in fit_diff(impact.text(str(output))):  # the terminal's width; --format json unbroken
                click.echo(line)
        else:
            click.echo("No changes.")
        sys.exit(Exit.DIFF if impact else 0)
    for line in warnings if check else ():
        click.echo(line, err=True)
    if check:
        diff = bundle.diff(files, output)
        if fmt == "json":
            click.echo(json.dumps({"output": str(output), "up_to_date": not diff, "changed": list(diff.changed),
                                   "missing": list(diff.missing), "extra": list(diff.extra)}, indent=2))
            sys.exit(Exit.DIFF if diff else 0)
        if diff:
            fit_echo(fit_to_print(f"{output}: differs from what `orchgen plan {workload}` writes:"))
            for line in diff.lines():
                fit_echo(f"  {line}")
            sys.exit(Exit.DIFF)
        fit_echo(fit_to_print(f"{output}: up to date ({len(files)} files)"))
        return
    gone = bundle.write(files, output, force=force, fleet=the_plan.name, inputs=(workload,))
    for path in gone if force else ():  # --force says what it removed; a re-plan's stale files go quietly
        _say(f"orchgen: --force: removed {output}/{path}")
    if fmt == "json":  # as `recommend --format json`: the result as one document, warnings on stderr
        click.echo(json.dumps({"fleet": the_plan.name, "output": str(output),
                               "planes": {n: {"nodes": len(p.nodes)} for n, p in the_plan.planes.items()},
                               "workloads": [{"name": d.name, "plane": d.plane, "pool": d.pool, "rule": rule_of(d)}
                                             for d in the_plan.workloads],
                               "files": sorted(files), "removed": gone if force else [],
                               "warnings": warnings, "next": next_steps(the_plan, output, len(warnings), 100)},
                              indent=2))
        for line in warnings:
            click.echo(line, err=True)
        return
    planes = ", ".join(f"{n} ({_nodes(len(p.nodes))})" for n, p in the_plan.planes.items())
    fit_echo(fit_to_print(f"{the_plan.name}: {planes}; wrote {len(files)} files to {output}/"))
    for line in workload_lines(the_plan):  # per workload: where it runs and the rule that chose it (wrapped)
        click.echo(fit_to_print(line))
    if not quiet:
        for line in listing(files):
            click.echo(line)
    for line in warnings:  # last, where they do not scroll away
        click.echo(line, err=True)
    for line in next_steps(the_plan, output, len(warnings)):
        click.echo(fit_to_print(line))


@cli.command()
@click.argument("bundle_dir", metavar="BUNDLE", type=click.Path(path_type=str))
@click.option("--crds", type=click.Path(path_type=str), multiple=True,
              help="directory of CRD YAMLs (searched recursively) to check custom resources against; repeatable")
@click.option("--chart-defaults", type=click.Path(path_type=str), default=None,
              help="directory with <component>/values.yaml of each chart, to check Helm values keys")
@click.option("--against", "old_bundle", metavar="OLD_BUNDLE", type=click.Path(path_type=str), default=None,
              help="the bundle applied now: summarize the re-plan and check it as updates of OLD_BUNDLE's objects")
@click.option("--offline", is_flag=True, help="use only the chart cache (no download) for CRDs and chart defaults")
@click.option("--no-fetch", is_flag=True, help="fetch nothing: skip the checks that need CRDs or chart defaults "
              "not given by --crds / --chart-defaults")
@click.option("--allow-repo", "allow_repos", metavar="URL", multiple=True,
              help="also fetch charts from this https:// or oci:// repository (by default only from the one "
              "orchgen's catalog pins for each chart); repeatable")
@_format("text (path:line: message), or one JSON document: findings (file, line, severity, message), "
         "notices, the re-plan, a summary")
def validate(bundle_dir: str, crds: tuple[str, ...], chart_defaults: str | None, old_bundle: str | None,
             offline: bool, no_fetch: bool, allow_repos: tuple[str, ...], fmt: str = "text") -> None:
    """Check a bundle (ours or hand-edited): every finding as path:line: message; exit 1 on errors.
    Without --crds / --chart-defaults, the CRDs and default values of the chart versions the bundle
    pins are fetched once from the charts' repositories into a cache ($XDG_CACHE_HOME/orchgen/charts;
    ORCHGEN_CHART_MIRROR replaces every repository). Only the repository orchgen's catalog pins for a
    chart is fetched from, over https, unless --allow-repo names another."""
    import tempfile

    from .validate.bundle_checks import bundle_releases, chart_defaults_dir, load_crds, validate_bundle

    registry = load_crds(crds) if crds else None  # the user's directories first: their errors first
    defaults = chart_defaults_dir(chart_defaults) if chart_defaults else None
    with tempfile.TemporaryDirectory(prefix="orchgen-defaults-") as tmp:
        if not no_fetch and (registry is None or defaults is None):
            from .validate import charts

            for repo in allow_repos:
                why = charts.repo_problem(repo)
                if why:
                    raise OrchgenError(f"{repo}: {why}", field="--allow-repo")
            _, found = charts.resolve(bundle_releases(bundle_dir, allow_repos), offline, allow_repos)
            if registry is None and charts.crd_dirs(found):
                registry = load_crds(charts.crd_dirs(found))
            if defaults is None and found:
                defaults = charts.defaults_view(found, Path(tmp))
        report = validate_bundle(bundle_dir, registry, defaults, against=old_bundle)
    if fmt == "json":
        click.echo(json.dumps(_validate_json(report), indent=2))
        if report.errors:
            sys.exit(Exit.DIFF)
        return
    for line in report.replan:  # every line fitted to the terminal, continuation lines indented
        fit_echo(fit_to_print(line))
    for notice in report.notices:
        fit_echo(fit_to_print(f"notice: {notice}"))
    for finding in report.findings:
        fit_echo(str(finding))
    fit_echo(fit_to_print(report.summary()))
    if report.errors:
        sys.exit(Exit.DIFF)


def _validate_json(report) -> dict:
    """`validate --format json`: the text's lines as data (each message fit to print, as the text's)."""
    e, w = len(report.errors), len(report.warnings)
    return {
        "bundle": report.root,
        "findings": [{"file": f.path, "line": f.line, "severity": f.severity, "message": fit_to_print(f.message)}
                     for f in report.findings],
        "notices": [fit_to_print(n) for n in report.notices],
        "replan": [fit_to_print(line) for line in report.replan],
        "summary": {"ok": not e, "errors": e, "warnings": w, "files_checked": report.files,
                    "checks_skipped": len(report.notices), "text": fit_to_print(report.summary())},
    }


@cli.command()
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("workload.yaml"), show_default=True,
              help="the file to write")
@click.option("--force", is_flag=True, help="replace an existing file")
@click.option("--name", default=None, help="the fleet's name (a DNS-1123 label)")
@click.option("--provider", type=click.Choice(providers.NAMES), default=None,
              help="where the GPU nodes run: generic (your machines) or a managed Kubernetes")
@click.option("--bare-metal/--no-bare-metal", default=None, help="generic only: machines you own and cable")
@click.option("--nodes", type=click.IntRange(1, 65536), default=None, help="GPU nodes")
@click.option("--gpu-type", default=None,
              help="GPU model as a GRES type (h100, a100, l40s ...; a near miss of one orchgen knows is refused)")
@click.option("--gpus-per-node", type=click.IntRange(1, 64), default=None)
@click.option("--fabric", type=click.Choice(["infiniband", "roce", "ethernet"]), default=None)
@click.option("--training-nodes", type=click.IntRange(0, 65536), default=None,
              help="nodes one tightly coupled training job spans (0: none)")
@click.option("--service/--no-service", default=None, help="a long-lived inference service")
@click.option("--slurm-controller", default=None, help="bare metal: the Slurm controller's short hostname")
@click.option("--os", "os_", type=click.Choice(list(BRINGUP_OS_SLURM)), default=None,
              help=f"bare metal: the hosts' OS; slurm_version is the release it packages (default {DEFAULT_OS})")
def init(output: Path, force: bool, **given) -> None:
    """Write a commented workload.yaml from a few questions (or the flags; no prompt when stdin
    is not a terminal: the defaults fill what no flag gives). Each answer is checked as it is given
    and only that question asked again; a bad or contradicting flag is refused before any question."""
    from .starter import Answers, check_gpu_type, check_hostname, check_name, workload_yaml

    ask = sys.stdin.isatty()
    defaults = Answers()
    answers: dict = {}
    checks = {"name": check_name, "gpu_type": check_gpu_type, "slurm_controller": check_hostname}
    flag = {"name": "--name (metadata.name)", "gpu_type": "--gpu-type",
            "slurm_controller": "--slurm-controller (fleet.slurm.controllers)"}

    for key, check in checks.items():  # a bad flag value: one line naming the flag, before any question
        if given.get(key) is not None and (why := check(given[key])):
            raise click.BadParameter(why, param_hint=flag[key])
    _refuse_contradictions(given)

    def checked(check):
        def proc(value: str) -> str:
            value = value.strip()
            why = check(value)
            if why:
                raise click.BadParameter(why)  # click prints "Error: <why>" and asks this question again
            return value
        return proc

    def pick(key: str, text: str, **kw):
        value = given.get(key)
        if value is None and ask:
            if kw.get("type") is bool:
                value = click.confirm(text, default=getattr(defaults, key))
            else:
                value = click.prompt(text, default=getattr(defaults, key), **kw)
        answers[key] = getattr(defaults, key) if value is None else value

    _not_a_link(output)
    if output.exists() and not force:
        raise OrchgenError("exists; pass --force to replace it", str(output))
    bare_implied = given["bare_metal"] or given["slurm_controller"] is not None or given["os_"] is not None
    pick("name", "Fleet name", value_proc=checked(check_name))
    if given["provider"] is None and bare_implied:
        answers["provider"] = "generic"  # --bare-metal, --slurm-controller, --os: the site's own machines
    else:
        pick("provider", "Provider", type=click.Choice(providers.NAMES))
    if answers["provider"] == "generic":
        if given["bare_metal"] is None and bare_implied:
            answers["bare_metal"] = True
        else:
            pick("bare_metal", "Bare metal (your machines, Slurm for multi-node jobs)?", type=bool)
    else:
        answers["bare_metal"] = False
    bare = answers["provider"] == "generic" and answers["bare_metal"]
    if not bare:  # a question's answer contradicts a flag: the flag is named
        for key, name in (("slurm_controller", "--slurm-controller"), ("os_", "--os")):
            if given[key] is not None:
                raise click.UsageError(f"{name} is for a bare-metal fleet (provider generic, bare metal)")
    pick("nodes", "GPU nodes", type=click.IntRange(1, 65536))
    pick("gpu_type", "GPU type (GRES name)", value_proc=checked(check_gpu_type))
    pick("gpus_per_node", "GPUs per node", type=click.IntRange(1, 64))
    if answers["provider"] == "eks":  # EC2 has no InfiniBand or RoCE: EFA is its RDMA (EKS device-management-efa)
        if given["fabric"] not in (None, "ethernet"):
            raise click.UsageError(_EKS_FABRIC.format(given["fabric"]))
        answers["fabric"] = "ethernet"
    else:
        pick("fabric", "Fabric", type=click.Choice(["infiniband", "roce", "ethernet"]))
    if given["training_nodes"] is not None and given["training_nodes"] > answers["nodes"]:
        raise click.BadParameter(f"{given['training_nodes']} is more than the fleet's {answers['nodes']} GPU nodes",
                                 param_hint="--training-nodes")
    pick("training_nodes", "Nodes of one training job (0: none)", type=click.IntRange(0, answers["nodes"]))
    pick("service", "An inference service too?", type=bool)
    if _service_without_a_node(bare, answers):
        if given["training_nodes"] is not None or not ask:
            raise click.BadParameter(
                f"a bare-metal fleet with an inference service keeps a node for it: at most "
                f"{answers['nodes'] - 1} of its {answers['nodes']} nodes (or --no-service)",
                param_hint="--training-nodes")
        click.echo(f"Error: the inference service needs a node of its own: at most {answers['nodes'] - 1}", err=True)
        answers["training_nodes"] = click.prompt("Nodes of one training job (0: none)",
                                                 default=answers["nodes"] - 1,
                                                 type=click.IntRange(0, answers["nodes"] - 1))
    if bare:
        value = given.get("slurm_controller")
        if value is None and ask:
            value = click.prompt("Slurm controller's short hostname (empty: later)", default="",
                                 show_default=False, value_proc=lambda v: checked(check_hostname)(v) if v.strip() else "")
        answers["controller"] = value or None
        answers["os"] = given.get("os_") or DEFAULT_OS
    text = workload_yaml(Answers(**answers))
    _plans_or_refuse(text, output.name)
    _write_file(output, text)
    click.echo(f"wrote {output}; next: orchgen recommend {output}, then orchgen plan {output} -o out/")


# Amazon EC2 offers no InfiniBand or RoCE fabric to its instances: multi-node GPU traffic takes EFA, which the
# EKS user guide's "Manage EFA devices on Amazon EKS" (device-management-efa) attaches through the EFA device
# plugin; orchgen installs it for provider eks whatever fleet.fabric.kind says, and kind stays ethernet there.
_EKS_FABRIC = ("--fabric {} is not a fabric EKS offers: EC2 instances have no InfiniBand or RoCE, multi-node jobs "
               "use EFA (which orchgen sets up for --provider eks); leave --fabric out, or give ethernet")


def _refuse_contradictions(given: dict) -> None:
    """init's flags that cannot all hold: one line naming them (exit 2), before any question."""
    cloud = given["provider"] not in (None, "generic")
    if given["provider"] == "eks" and given["fabric"] not in (None, "ethernet"):
        raise click.UsageError(_EKS_FABRIC.format(given["fabric"]))
    if cloud and given["bare_metal"]:
        raise click.UsageError(f"--bare-metal is for provider generic (your own machines), not --provider "
                               f"{given['provider']}")
    for key, name in (("slurm_controller", "--slurm-controller"), ("os_", "--os")):
        if given[key] is None:
            continue
        if cloud:
            raise click.UsageError(f"{name} is for a bare-metal fleet, not --provider {given['provider']}")
        if given["bare_metal"] is False:
            raise click.UsageError(f"{name} is for a bare-metal fleet, not --no-bare-metal")
    if given["nodes"] is not None and given["training_nodes"] is not None and given["training_nodes"] > given["nodes"]:
        raise click.UsageError(f"--training-nodes {given['training_nodes']} is more than --nodes {given['nodes']}")


def _service_without_a_node(bare: bool, a: dict) -> bool:
    """A bare-metal fleet gives an inference service a node of its own: a training job over every node of a
    fleet of two or more leaves the Kubernetes plane none (the planner refuses that split)."""
    return bare and a["service"] and a["nodes"] >= 2 and a["training_nodes"] >= a["nodes"]


def _plans_or_refuse(text: str, name: str) -> None:
    """What init would write plans (checked on a copy in a temporary folder: a refusal names the field,
    never a file that was not written)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="orchgen-init-") as tmp:
        path = Path(tmp) / name
        path.write_text(text, encoding="utf-8")
        try:
            _load_plan(str(path), warnings=[])
        except OrchgenError as err:
            raise OrchgenError(f"the answers do not plan, nothing written: {err.message}", field=err.field) from None


@cli.command()
@click.argument("workload", type=click.Path(dir_okay=True, path_type=str))
@click.option("--trace", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="replay this trace CSV (README: orchgen's columns, or Alibaba's pai_task_table.csv) "
              "instead of the workloads' demand")
@click.option("--hours", type=click.FloatRange(min=0.01, max=24 * 366), default=168.0, show_default=True,
              help="hours of arrivals drawn from the demand")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the demand's random draws")
@_format("text, or JSON: each report's figures")
@click.option("--compare", is_flag=True, help="the same demand against options.split's modes, the gang "
              "schedulers and each workload pinned to the other plane, in one table")
def simulate(workload: str, trace: str | None, hours: float, seed: int, fmt: str, compare: bool) -> None:
    """Replay the demand (or a trace) against the plan: queue waits, GPU utilization, gang deadlocks."""
    from .simulate.command import run

    run(workload, trace, hours, seed, fmt, compare)


_MAX_PROBLEMS = 20  # problem lines `import slurm` prints before its summary line


@cli.group("import")
def import_() -> None:
    """Adopt what a site runs already: write a workload.yaml from its configuration."""


@import_.command("slurm")
@click.argument("slurm_conf", metavar="SLURM_CONF", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--gres", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="gres.conf (default: the one beside SLURM_CONF, if any)")
@click.option("--topology", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="topology.conf or topology.yaml (default: topology.conf beside SLURM_CONF with topology/tree)")
@click.option("--cgroup", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="cgroup.conf (default: the one beside SLURM_CONF, if any)")
@click.option("--sacctmgr-dump", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="`sacctmgr dump CLUSTER file=FILE` output: its accounts become tenants")
@click.option("--sacctmgr-qos", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="`sacctmgr -P show qos` output: the site's QOS and their limits (a dump has none)")
@click.option("--slurm-version", default=None, help="the Slurm release the site runs (options.slurm_version)")
@click.option("--fabric", type=click.Choice(["infiniband", "roce", "ethernet"]), default=None,
              help="the GPU nodes' interconnect (fleet.fabric.kind), which no Slurm file states; default ethernet, "
              "said in the report")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("workload.yaml"), show_default=True,
              help="the workload.yaml to write")
@click.option("--force", is_flag=True, help="replace an existing file")
@click.option("--input-root", "input_roots", multiple=True, type=click.Path(file_okay=False, path_type=str),
              help="also follow SLURM_CONF's Include lines into this folder; by default only into the folder "
              "of SLURM_CONF (repeatable)")
def import_slurm(slurm_conf: Path, gres: Path | None, topology: Path | None, cgroup: Path | None,
                 sacctmgr_dump: Path | None, slurm_version: str | None, output: Path, force: bool,
                 input_roots: tuple[str, ...], sacctmgr_qos: Path | None = None, fabric: str | None = None) -> None:
    """Read a site's slurm.conf (Includes followed), gres.conf, topology and cgroup.conf and write a
    workload.yaml that plans back into them: what it modelled, carried verbatim (site:) and refused
    is printed, each with its file:line."""
    from .adopt import Sources, import_slurm as run

    _not_a_link(output)
    if output.exists() and not force:
        raise OrchgenError("exists; pass --force to replace it", str(output))
    if not output.parent.is_dir():
        raise OrchgenError("no such directory to write workload.yaml into", str(output.parent))
    src = Sources(slurm_conf, gres, topology, cgroup, sacctmgr_dump, input_roots, sacctmgr_qos, fabric)
    try:
        text, report, extra = run(src, output, slurm_version)
    except OrchgenError as err:
        others = list(getattr(err, "others", ()))  # one line each; the last (main's) line is the first problem
        for other in others[:_MAX_PROBLEMS]:
            _say(f"orchgen: {other}")
        if len(others) > _MAX_PROBLEMS:  # a binary or foreign file: the first ones say enough
            _say(f"orchgen: ... and {len(others) - _MAX_PROBLEMS} more problems like these")
        raise
    for line in report.lines():
        fit_echo(cut(fit_to_print(line), MAX_LINE))
    _write_file(output, text)
    n = len(report.modelled), len(report.carried), len(report.refused), len(report.added), len(report.asks)
    fit_echo(fit_to_print(f"wrote {output}: {n[0]} modelled, {n[1]} carried in site:, {n[2]} refused, {n[3]} "
                            f"added by orchgen, {n[4]} left for you to give; "
                            f"next: orchgen plan {output} -o out/"))


@cli.command()
@click.argument("workload", type=click.Path(dir_okay=True, path_type=str))
@click.argument("hosts", metavar="HOSTS.yaml", type=click.Path(dir_okay=False, path_type=str))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=Path("facts.yaml"),
              show_default=True, help="where the hosts' facts go (YAML)")
@click.option("--timeout", type=click.IntRange(5, 600), default=60, show_default=True,
              help="seconds for one host (ssh, then every command it runs)")
@_format("the differences")
@_INPUT_ROOT
def discover(workload: str, hosts: str, output: Path, timeout: int, fmt: str, input_roots: tuple[str, ...]) -> None:
    """Read the Slurm hosts over SSH (HOSTS.yaml: the bring-up's inventory), write their facts and report every
    difference from the fleet model; exit 1 when there is one."""
    from . import discover as disc
    from .yamlio import dump_yaml

    the_plan, _ = _load_plan(workload, roots=input_roots, warnings=[])
    if "slurm" not in the_plan.planes:
        raise OrchgenError("discover reads the hosts of a Slurm plane, and this fleet has none", workload)
    inventory = disc.read_inventory(hosts)
    facts = disc.gather(inventory, timeout)
    lines = disc.drift(the_plan, facts)
    _not_a_link(output)
    _write_file(output, dump_yaml(disc.facts_document(the_plan.name, facts, lines), sort_keys=False).decode())
    if fmt == "json":
        click.echo(json.dumps({"fleet": the_plan.name, "facts": str(output), "hosts": len(facts),
                               "unread": sorted(h for h, f in facts.items() if "error" in f), "drift": lines}, indent=2))
    else:
        for line in lines:
            click.echo(fit_to_print(f"drift: {line}"))
        read = sum(1 for f in facts.values() if "error" not in f)
        click.echo(fit_to_print(f"{the_plan.name}: read {read} of {len(facts)} hosts; "
                                f"{len(lines) or 'no'} difference{'s' if len(lines) != 1 else ''} from the model; "
                                f"facts in {output}"))
    sys.exit(Exit.DIFF if lines else 0)


@cli.command()
@click.option("--plan", "of_plan", is_flag=True, help="the JSON Schema of a bundle's plan.json instead")
@click.option("--markdown", is_flag=True, help="workload.yaml's reference in Markdown instead: every field's "
              "type, default, allowed values and description (docs/workload-yaml-reference.md)")
def schema(of_plan: bool, markdown: bool) -> None:
    """Print the JSON Schema of workload.yaml (for editors), or with --plan of plan.json."""
    if of_plan and markdown:
        raise click.UsageError("--plan and --markdown: give one")
    if markdown:
        from .spec.reference import markdown as reference

        click.echo(reference(), nl=False)
        return
    if of_plan:
        from .contract import PLAN_SCHEMA

        click.echo(json.dumps(PLAN_SCHEMA, indent=2, sort_keys=True))
        return
    from .spec import json_schema

    click.echo(json.dumps(json_schema(), indent=2, sort_keys=True))


_LINK = "is a symbolic link; orchgen does not write through one (name the file itself)"


def _not_a_link(output: Path) -> None:
    """`init -o` / `import -o`: a link (dangling or not) would put the file somewhere else."""
    if output.is_symlink():
        raise OrchgenError(_LINK, str(output))


def _write_file(output: Path, text: str) -> None:
    """Write `output` itself, never through a link put there meanwhile (O_NOFOLLOW)."""
    try:
        fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OrchgenError(_LINK, str(output)) from None
        raise OrchgenError(f"cannot write: {exc.strerror}", str(output)) from None


def _say(line: str) -> None:
    """One line on stderr, fit to print (user input escaped, credentials masked); stderr itself
    failing is ignored: the exit code still tells."""
    try:
        # cut last, as a backstop: each message cuts the values it repeats (errors.cut), and a line of
        # thousands of characters is a site's file or a user's value echoed whole
        click.echo(cut(fit_to_print(" ".join(line.split("\n"))), MAX_LINE), err=True)
    except OSError:
        pass


def _stdout_error(exc: OSError) -> None:
    """Standard output could not be written (`orchgen schema > /dev/full`, a closed pipe): one line, exit 2."""
    try:  # what is still buffered would fail again at exit: drop it
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives until exit
    except OSError:
        pass
    _say(f"orchgen: cannot write to standard output: {exc.strerror or exc}")
    sys.exit(Exit.ERROR)


class _Closed(io.TextIOBase):
    """Standard output when the process started with it closed (`orchgen recommend x >&-`: Python sets
    sys.stdout to None, and click.echo would drop every line): the first write fails as writing to a
    closed descriptor does, so the command says so in one line and exits 2."""

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "it is closed")

    def writable(self) -> bool:
        return True


def main(argv: list[str] | None = None) -> None:
    from .signals import Stopped, quiet, stopped, trap

    trap()  # again for `python -m generator.cli`; the console script (generator/entry.py) trapped them first
    try:
        try:
            _main(argv)
        except Stopped as exc:  # SIGINT, SIGTERM, SIGHUP: the cleanups ran on the way here; one line, exit 2
            stopped(exc)
    except Stopped as exc:  # a second signal before the first one's line was said
        stopped(exc)
    finally:  # the work is done (or said): a signal while Python shuts down no longer changes the exit code
        quiet()


def _main(argv: list[str] | None) -> None:
    if sys.stdout is None:
        sys.stdout = _Closed()
    try:
        cli.main(args=argv, standalone_mode=False)
        sys.stdout.flush()  # inside the try: a full disk behind stdout is an error here, not at exit
    except OrchgenError as exc:
        _say(f"orchgen: {exc}")
        sys.exit(Exit.ERROR)
    except click.exceptions.Abort:
        _say("orchgen: aborted")
        sys.exit(Exit.ERROR)
    except click.ClickException as exc:
        _say(f"orchgen: {exc.format_message()}")
        sys.exit(Exit.ERROR)
    except SystemExit:
        raise
    except RecursionError:
        _say("orchgen: input nested too deeply")
        sys.exit(Exit.ERROR)
    except MemoryError:
        _say("orchgen: out of memory (the input is too large)")
        sys.exit(Exit.ERROR)
    except OSError as exc:
        if exc.filename is None and exc.errno in (errno.ENOSPC, errno.EPIPE, errno.EIO, errno.EBADF,
                                                  errno.EDQUOT, errno.EFBIG, errno.EROFS):
            _stdout_error(exc)
        # any other OS error names its path: an input or output the user gave
        where = f"{exc.filename}: " if exc.filename else ""
        _say(f"orchgen: {where}{exc.strerror or exc}")
        sys.exit(Exit.ERROR)
    except Exception as exc:  # a bug: still one line, never a traceback on a user's terminal
        _say(f"orchgen: internal error: {type(exc).__name__}: {exc} (please report)")
        sys.exit(3)


if __name__ == "__main__":
    main()
