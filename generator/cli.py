"""The orchgen command line: commands and exit codes only, no logic.

Exit codes: 0 ok; 1 differences (`plan --check`) or findings (`validate`); 2 bad input or a
refused operation, always as one line on stderr naming file, line and field.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .errors import Exit, OrchgenError


def _load_plan(path: str, gitops: str | None = None, render: bool = False, warnings: list | None = None):
    """The plan (and with `render`, the bundle's files) of a workload.yaml. An error the planner or
    a renderer raises about a field is pointed at that field's line in the file. With `warnings`,
    the warning lines are appended there instead of printed (`plan` prints them after its listing)."""
    from . import spec
    from .decide import make_plan

    fleet, locate = spec.load_located(path)
    if gitops:
        fleet = fleet.model_copy(update={"options": fleet.options.model_copy(update={"gitops": gitops})})
    try:
        plan = make_plan(fleet, path)
        if not render:
            _warn(plan, locate, bundle=False, out=warnings)
            return plan, None
        from .render import render as render_files

        files = render_files(plan)
        _warn(plan, locate, bundle=True, out=warnings)  # after rendering: a refusal there is the one line printed
        return plan, files
    except OrchgenError as err:
        raise locate(err) from None


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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="orchgen")
def cli() -> None:
    """Pick the control plane for a GPU fleet and write the bundle real tools consume."""


@cli.command()
@click.argument("workload", type=click.Path(dir_okay=True, path_type=str))
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def recommend(workload: str, fmt: str) -> None:
    """Show the plane, add-ons and reasons per workload and for the fleet. A fleet that cannot be
    planned still gets its per-workload decisions (they do not depend on the split), then the error."""
    from . import spec
    from .decide import make_plan, per_workload

    fleet, locate = spec.load_located(workload)
    try:
        plan = make_plan(fleet, workload)
        from .render import render as render_files

        render_files(plan)  # what `plan` refuses while writing the bundle, recommend refuses too
        _warn(plan, locate, bundle=False)
    except OrchgenError as err:
        _show_workloads(per_workload(fleet), fmt, fleet.metadata.name)
        raise locate(err) from None
    if fmt == "json":
        data = plan.to_json()
        out = {
            "fleet": {k: data[k] for k in ("name", "hybrid", "gang_scheduler", "reasons")}
            | {"planes": {n: {k: p[k] for k in ("host", "operator", "node_count", "gpus", "addons")}
                          for n, p in data["planes"].items()}},
            "workloads": [w.recommendation() for w in plan.workloads],
        }
        click.echo(json.dumps(out, indent=2))
        return
    console = _show_workloads(plan.workloads, fmt, plan.name)
    from rich.text import Text

    from .recommend_view import hanging

    console.print(f"[bold]{plan.name}: fleet[/bold]")
    for name, p in plan.planes.items():
        host = f" on Kubernetes ({p.operator})" if p.operator else ""
        console.print(Text(hanging(f"  {name}{host}: {len(p.nodes)} nodes; add-ons: {', '.join(p.addons) or '-'}",
                                   console.width, 4)))
    for line in plan.reasons:
        console.print(Text(hanging(f"  - {line}", console.width, 4)))


def _show_workloads(workloads, fmt: str, name: str):
    """The per-workload table; in JSON only when the fleet failed (`fleet` is then null)."""
    if fmt == "json":
        click.echo(json.dumps({"fleet": None, "workloads": [w.recommendation() for w in workloads]}, indent=2))
        return None
    from rich.console import Console

    from .recommend_view import workloads_view

    console = Console()  # the terminal's width (COLUMNS; 80 when not a terminal)
    console.print(workloads_view(workloads, name, console.width))
    return console


@cli.command()
@click.argument("workload", type=click.Path(dir_okay=True, path_type=str))
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("out"), show_default=True,
              help="bundle directory")
@click.option("--check", is_flag=True, help="write nothing; exit 1 if the directory differs")
@click.option("--force", is_flag=True, help="replace a directory orchgen did not write")
@click.option("--gitops", type=click.Choice(["none", "kustomize", "argocd", "flux"]), default=None,
              help="override options.gitops")
@click.option("-q", "--quiet", is_flag=True, help="no file listing: one summary line, warnings and the next step")
def plan(workload: str, output: Path, check: bool, force: bool, gitops: str | None, quiet: bool) -> None:
    """Decide and write the bundle (atomically, byte-identical for the same input)."""
    from . import bundle
    from .plan_output import listing, next_steps

    warnings: list[str] = []
    the_plan, files = _load_plan(workload, gitops, render=True, warnings=warnings)
    for line in warnings if check else ():
        click.echo(line, err=True)
    if check:
        diff = bundle.diff(files, output)
        if diff:
            click.echo(f"{output}: differs from what `orchgen plan {workload}` writes:")
            for line in diff.lines():
                click.echo(f"  {line}")
            sys.exit(Exit.DIFF)
        click.echo(f"{output}: up to date ({len(files)} files)")
        return
    bundle.write(files, output, force=force)
    planes = ", ".join(f"{n} ({len(p.nodes)} nodes)" for n, p in the_plan.planes.items())
    click.echo(f"{the_plan.name}: {planes}; wrote {len(files)} files to {output}/")
    if not quiet:
        for line in listing(files):
            click.echo(line)
    for line in warnings:  # last, where they do not scroll away
        click.echo(line, err=True)
    for line in next_steps(the_plan, output, len(warnings)):
        click.echo(line)


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
def validate(bundle_dir: str, crds: tuple[str, ...], chart_defaults: str | None, old_bundle: str | None,
             offline: bool, no_fetch: bool) -> None:
    """Check a bundle (ours or hand-edited): every finding as path:line: message; exit 1 on errors.
    Without --crds / --chart-defaults, the CRDs and default values of the chart versions the bundle
    pins are fetched once from the charts' repositories into a cache ($XDG_CACHE_HOME/orchgen/charts;
    ORCHGEN_CHART_MIRROR replaces every repository)."""
    import tempfile

    from .validate.bundle_checks import bundle_releases, chart_defaults_dir, load_crds, validate_bundle

    registry = load_crds(crds) if crds else None  # the user's directories first: their errors first
    defaults = chart_defaults_dir(chart_defaults) if chart_defaults else None
    with tempfile.TemporaryDirectory(prefix="orchgen-defaults-") as tmp:
        if not no_fetch and (registry is None or defaults is None):
            from .validate import charts

            _, found = charts.resolve(bundle_releases(bundle_dir), offline)
            if registry is None and charts.crd_dirs(found):
                registry = load_crds(charts.crd_dirs(found))
            if defaults is None and found:
                defaults = charts.defaults_view(found, Path(tmp))
        report = validate_bundle(bundle_dir, registry, defaults, against=old_bundle)
    for line in report.replan:
        click.echo(line)
    for notice in report.notices:
        click.echo(f"notice: {notice}")
    for finding in report.findings:
        click.echo(str(finding))
    click.echo(report.summary())
    if report.errors:
        sys.exit(Exit.DIFF)


@cli.command()
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("workload.yaml"), show_default=True,
              help="the file to write")
@click.option("--force", is_flag=True, help="replace an existing file")
@click.option("--name", default=None, help="the fleet's name (a DNS-1123 label)")
@click.option("--provider", type=click.Choice(["generic", "eks", "gke", "aks", "oke"]), default=None,
              help="where the GPU nodes run: generic (your machines) or a managed Kubernetes")
@click.option("--bare-metal/--no-bare-metal", default=None, help="generic only: machines you own and cable")
@click.option("--nodes", type=click.IntRange(1, 65536), default=None, help="GPU nodes")
@click.option("--gpu-type", default=None, help="GPU model as a GRES type (h100, a100, l40s ...)")
@click.option("--gpus-per-node", type=click.IntRange(1, 64), default=None)
@click.option("--fabric", type=click.Choice(["infiniband", "roce", "ethernet"]), default=None)
@click.option("--training-nodes", type=click.IntRange(0, 65536), default=None,
              help="nodes one tightly coupled training job spans (0: none)")
@click.option("--service/--no-service", default=None, help="a long-lived inference service")
@click.option("--slurm-controller", default=None, help="bare metal: the Slurm controller's short hostname")
def init(output: Path, force: bool, **given) -> None:
    """Write a commented workload.yaml from a few questions (or the flags; no prompt when stdin
    is not a terminal: the defaults fill what no flag gives)."""
    from .starter import Answers, workload_yaml

    ask = sys.stdin.isatty()
    defaults = Answers()
    answers: dict = {}

    def pick(key: str, text: str, **kw):
        value = given.get(key)
        if value is None and ask:
            if kw.get("type") is bool:
                value = click.confirm(text, default=getattr(defaults, key))
            else:
                value = click.prompt(text, default=getattr(defaults, key), **kw)
        answers[key] = getattr(defaults, key) if value is None else value

    if output.exists() and not force:
        raise OrchgenError("exists; pass --force to replace it", str(output))
    pick("name", "Fleet name")
    pick("provider", "Provider", type=click.Choice(["generic", "eks", "gke", "aks", "oke"]))
    if answers["provider"] == "generic":
        pick("bare_metal", "Bare metal (your machines, Slurm for multi-node jobs)?", type=bool)
    else:
        answers["bare_metal"] = False
    pick("nodes", "GPU nodes", type=click.IntRange(1, 65536))
    pick("gpu_type", "GPU type (GRES name)")
    pick("gpus_per_node", "GPUs per node", type=click.IntRange(1, 64))
    pick("fabric", "Fabric", type=click.Choice(["infiniband", "roce", "ethernet"]))
    pick("training_nodes", "Nodes of one training job (0: none)", type=click.IntRange(0, answers["nodes"]))
    pick("service", "An inference service too?", type=bool)
    if answers["provider"] == "generic" and answers["bare_metal"]:
        value = given.get("slurm_controller")
        if value is None and ask:
            value = click.prompt("Slurm controller's short hostname (empty: later)", default="",
                                 show_default=False) or None
        answers["controller"] = value
    answers["training_nodes"] = min(answers["training_nodes"], answers["nodes"])
    text = workload_yaml(Answers(**answers))
    try:
        output.write_text(text)
    except OSError as exc:
        raise OrchgenError(f"cannot write: {exc.strerror}", str(output)) from None
    try:
        _load_plan(str(output), warnings=[])  # what init writes plans; a bad answer is named by its line
    except OrchgenError:
        output.unlink()
        raise
    click.echo(f"wrote {output}; next: orchgen recommend {output}, then orchgen plan {output} -o out/")


@cli.command()
def schema() -> None:
    """Print the JSON Schema of workload.yaml (for editors)."""
    from .spec import json_schema

    click.echo(json.dumps(json_schema(), indent=2, sort_keys=True))


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except OrchgenError as exc:
        click.echo(f"orchgen: {exc}", err=True)
        sys.exit(Exit.ERROR)
    except click.exceptions.Abort:
        click.echo("orchgen: aborted", err=True)
        sys.exit(Exit.ERROR)
    except click.ClickException as exc:
        click.echo(f"orchgen: {exc.format_message()}", err=True)
        sys.exit(Exit.ERROR)
    except SystemExit:
        raise
    except RecursionError:
        click.echo("orchgen: input nested too deeply", err=True)
        sys.exit(Exit.ERROR)
    except Exception as exc:  # a bug: still one line, never a traceback on a user's terminal
        click.echo(f"orchgen: internal error: {type(exc).__name__}: {exc} (please report)", err=True)
        sys.exit(3)


if __name__ == "__main__":
    main()
