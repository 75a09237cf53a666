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


def _load_plan(path: str, gitops: str | None = None, render: bool = False):
    """The plan (and with `render`, the bundle's files) of a workload.yaml. An error the planner or
    a renderer raises about a field is pointed at that field's line in the file."""
    from . import spec
    from .decide import make_plan

    fleet, locate = spec.load_located(path)
    if gitops:
        fleet = fleet.model_copy(update={"options": fleet.options.model_copy(update={"gitops": gitops})})
    try:
        plan = make_plan(fleet, path)
        if not render:
            _warn(plan, locate, bundle=False)
            return plan, None
        from .render import render as render_files

        files = render_files(plan)
        _warn(plan, locate, bundle=True)  # after rendering: a refusal there is the one line printed
        return plan, files
    except OrchgenError as err:
        raise locate(err) from None


def _warn(plan, locate, bundle: bool) -> None:
    """Each warning as one stderr line naming file:line: field; under options.strict the first one
    refuses the plan instead (exit 2, nothing written). Warnings about the bundle's placeholders
    only when a bundle is written (`recommend` needs no fleet.slurm)."""
    for warning in plan.warnings:
        if warning.bundle_only and not bundle:
            continue
        err = locate(OrchgenError(warning.message, None, None, warning.field))
        if plan.strict:
            err.message += " (options.strict: true refuses what would otherwise be a warning)"
            raise err
        click.echo(f"orchgen: warning: {err}", err=True)


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
    console.print(f"[bold]{plan.name}: fleet[/bold]")
    for name, p in plan.planes.items():
        host = f" on Kubernetes ({p.operator})" if p.operator else ""
        console.print(f"  {name}{host}: {len(p.nodes)} nodes; add-ons: {', '.join(p.addons) or '-'}")
    for line in plan.reasons:
        console.print(f"  - {line}", highlight=False)


def _show_workloads(workloads, fmt: str, name: str):
    """The per-workload table; in JSON only when the fleet failed (`fleet` is then null)."""
    if fmt == "json":
        click.echo(json.dumps({"fleet": None, "workloads": [w.recommendation() for w in workloads]}, indent=2))
        return None
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{name}: per workload", show_lines=True)
    for col in ("workload", "primary", "plane", "gang", "add-ons", "why"):
        table.add_column(col)
    for w in workloads:
        primary = w.primary + (f" on {w.ray_host}" if w.ray_host else "") + (" (hybrid)" if w.hybrid else "")
        plane = w.plane + (" (pinned)" if w.pinned else "")
        table.add_row(w.name, primary, plane, "REQUIRED" if w.gang_scheduler_required else "-",
                      ", ".join(w.addons), "\n".join(w.reasons))
    console = Console(width=max(120, Console().width))
    console.print(table)
    return console


@cli.command()
@click.argument("workload", type=click.Path(dir_okay=True, path_type=str))
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("out"), show_default=True,
              help="bundle directory")
@click.option("--check", is_flag=True, help="write nothing; exit 1 if the directory differs")
@click.option("--force", is_flag=True, help="replace a directory orchgen did not write")
@click.option("--gitops", type=click.Choice(["none", "kustomize", "argocd", "flux"]), default=None,
              help="override options.gitops")
def plan(workload: str, output: Path, check: bool, force: bool, gitops: str | None) -> None:
    """Decide and write the bundle (atomically, byte-identical for the same input)."""
    from . import bundle

    the_plan, files = _load_plan(workload, gitops, render=True)
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
    for path, data in files.items():
        click.echo(f"  {path}  ({len(data)} bytes)")


@cli.command()
@click.argument("bundle_dir", metavar="BUNDLE", type=click.Path(path_type=str))
@click.option("--crds", type=click.Path(path_type=str), multiple=True,
              help="directory of CRD YAMLs (searched recursively) to check custom resources against; repeatable")
@click.option("--chart-defaults", type=click.Path(path_type=str), default=None,
              help="directory with <component>/values.yaml of each chart, to check Helm values keys")
@click.option("--against", "old_bundle", metavar="OLD_BUNDLE", type=click.Path(path_type=str), default=None,
              help="the bundle applied now: summarize the re-plan and check it as updates of OLD_BUNDLE's objects")
def validate(bundle_dir: str, crds: tuple[str, ...], chart_defaults: str | None, old_bundle: str | None) -> None:
    """Check a bundle (ours or hand-edited): every finding as path:line: message; exit 1 on errors."""
    from .validate.bundle_checks import chart_defaults_dir, load_crds, validate_bundle

    registry = load_crds(crds) if crds else None
    defaults = chart_defaults_dir(chart_defaults) if chart_defaults else None
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
@click.argument("workload", type=click.Path(dir_okay=True, path_type=str))
@click.option("--trace", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="replay this trace CSV (README: orchgen's columns, or Alibaba's pai_task_table.csv) "
              "instead of the workloads' demand")
@click.option("--hours", type=click.FloatRange(min=0.01, max=24 * 366), default=168.0, show_default=True,
              help="hours of arrivals drawn from the demand")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the demand's random draws")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--compare", is_flag=True, help="the same demand against options.split's modes, the gang "
              "schedulers and each workload pinned to the other plane, in one table")
def simulate(workload: str, trace: str | None, hours: float, seed: int, fmt: str, compare: bool) -> None:
    """Replay the demand (or a trace) against the plan: queue waits, GPU utilization, gang deadlocks."""
    from .simulate.command import run

    run(workload, trace, hours, seed, fmt, compare)


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
