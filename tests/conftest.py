"""Shared fixtures: example paths, a runner for the real `orchgen` CLI, and one MariaDB per test
session for the Slurm clusters that run with accounting (slurm_db)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Every orchgen the tests start runs at COLUMNS=TEST_COLUMNS (wide) unless the test gives its own: orchgen
    fits its output to the terminal, 80 columns off one (issue 39), and the tests read each finding, impact
    and report line whole, whatever the length of their temporary paths. tests/test_output_width.py and
    test_first_hour.py check the widths themselves (80, none, 200, a pseudo-terminal). pytest's own report
    keeps the real terminal's width."""
    import os

    from tests.support import TEST_COLUMNS

    writer = config.pluginmanager.get_plugin("terminalreporter")
    if writer is not None:
        writer._tw.fullwidth = writer._tw.fullwidth  # fixed now, before COLUMNS changes what it would read
    os.environ["COLUMNS"] = TEST_COLUMNS


def all_examples() -> list[Path]:
    return sorted(EXAMPLES.glob("*.yaml"))


@pytest.fixture
def example():
    def get(name: str) -> Path:
        path = EXAMPLES / f"{name}.yaml"
        assert path.is_file(), path
        return path

    return get


def run_orchgen(*args: str, cwd: Path | None = None, check: bool = False) -> subprocess.CompletedProcess:
    """Run the CLI as a user would (a subprocess: the installed `orchgen` of ORCHGEN_BIN when scripts/test.sh
    set it, from outside the source tree unless `cwd` says else), returning its exit code and output."""
    from tests.support import run_cli

    proc = run_cli(args, cwd=cwd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"orchgen {' '.join(map(str, args))} exited {proc.returncode}: {proc.stderr}")
    return proc


@pytest.fixture
def orchgen():
    return run_orchgen


@pytest.fixture(scope="session")
def slurm_db(tmp_path_factory):
    """One private MariaDB for the session's accounting clusters: `SlurmCluster(conf, database=slurm_db)`.

    Each cluster still gets a database and a database user of its own on it; starting it once
    saves ~1 s per cluster. Skips (fails under ORCHGEN_STRICT=1) without root or MariaDB.
    """
    import os

    from tests._consumers import require
    from tests.slurmharness import mariadb

    require(os.geteuid() == 0, "a private MariaDB for slurmdbd runs as root here")
    problem = mariadb.installed()
    require(problem is None, f"{problem}; run: apt-get install -y --no-install-recommends mariadb-server")
    directory = tmp_path_factory.mktemp("mariadb")
    with mariadb.MariaDB(directory) as db:
        yield db
    shutil.rmtree(directory, ignore_errors=True)  # ~100 MB of datadir; pytest keeps its last 3 tmp trees


# --- CI's time budget (issue 32): parallel workers, long tests first, time per suite ---------------------
# scripts/test.sh runs pytest with pytest-xdist (`-n N --dist loadgroup --no-loadscope-reorder`). Two rules
# keep that correct and fast:
# - the tests of a module that share a module- or class-scoped fixture (one slurmctld, one set of bare
#   hosts on fixed 127.0.0.N addresses, one planned bundle) run on one worker: they carry
#   `xdist_group(<module>)`, so the fixture is set up once and never twice at the same time;
# - the modules that drive real consumers (a control plane, slurmctld, bare hosts: the slow ones) are
#   sent first, the grouped ones before the single tests, so no worker starts a long test last while
#   the others sit idle (longest-first scheduling). Modules stay whole, so a serial run is unchanged.
# At the end the time per suite (test module: setup, call and teardown of its tests, summed over the
# workers) is printed, and written as JSON to $ORCHGEN_SUITE_TIMES for .ci/run's budget line.
# The suites of one test that runs for many minutes (CI of 5db9745, 3 workers on 2 cores: the Debian 13
# Pulumi bring-up 805 s, the Debian 12 bring-up 503 s): sent before everything else. Sent in their
# alphabetical place, the Pulumi one started when the rest of the heavy work was mostly done, so it ran
# alone at the end while the other workers sat idle (the per-worker idle time below shows it).
_LONGEST_FIRST = ("tests/test_pulumi_up_real.py", "tests/test_bringup_real.py")
_HEAVY_FIXTURES = {"kube", "kube_factory", "slurm_db"}
_HEAVY_MARKS = {"slurm", "chroot", "slow"}


def _shares_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(d.scope in ("module", "class", "package")
               for defs in info.name2fixturedefs.values() for d in defs)


def _heavy(item: pytest.Item) -> bool:
    if item.fspath.basename.endswith("_real.py"):
        return True
    if _HEAVY_MARKS & {m.name for m in item.iter_markers()}:
        return True
    return bool(_HEAVY_FIXTURES & set(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    rank: dict[str, int] = {}
    for module, its in modules.items():
        sharing = [i for i in its if _shares_fixture(i)]
        for i in sharing:  # the module's other tests stay free to run on any worker
            i.add_marker(pytest.mark.xdist_group(module))
        grouped = bool(sharing)
        heavy = any(_heavy(i) for i in its)
        rank[module] = 0 if heavy and grouped else 1 if heavy else 2
        if module in _LONGEST_FIRST:
            rank[module] = -len(_LONGEST_FIRST) + _LONGEST_FIRST.index(module)
    order = {m: n for n, m in enumerate(modules)}
    items.sort(key=lambda i: (rank[i.nodeid.split("::", 1)[0]], order[i.nodeid.split("::", 1)[0]]))


_suite_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # on the controller this sees every worker's reports
    suite = report.nodeid.split("::", 1)[0]
    _suite_seconds[suite] = _suite_seconds.get(suite, 0.0) + report.duration
    worker = getattr(getattr(report, "node", None), "gateway", None)
    start, stop = getattr(report, "start", None), getattr(report, "stop", None)
    if worker is not None and start is not None and stop is not None:
        first, last, busy = _worker_span.get(worker.id, (start, stop, 0.0))
        _worker_span[worker.id] = (min(first, start), max(last, stop), busy + report.duration)


# per xdist worker: (first test's start, last test's end, test-seconds), for the idle time at the end
_worker_span: dict[str, tuple[float, float, float]] = {}


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    import json
    import os

    if hasattr(config, "workerinput") or not _suite_seconds:
        return
    ranked = sorted(_suite_seconds.items(), key=lambda kv: -kv[1])
    tr = terminalreporter
    tr.write_sep("=", f"time per suite (test-seconds, all workers; {len(ranked)} suites)")
    for suite, seconds in ranked[:25]:
        tr.write_line(f"{seconds:8.1f} s  {suite}")
    if len(ranked) > 25:
        rest = sum(s for _, s in ranked[25:])
        tr.write_line(f"{rest:8.1f} s  ({len(ranked) - 25} other suites)")
    if _worker_span:
        begin = min(f for f, _, _ in _worker_span.values())
        end = max(last for _, last, _ in _worker_span.values())
        tr.write_line("per worker: test-seconds, and how long it sat idle after its last test while others ran")
        for w, (first, last, busy) in sorted(_worker_span.items()):
            tr.write_line(f"{w:>8}  {busy:7.1f} s busy, first test at +{first - begin:.0f} s, "
                          f"idle {end - last:6.1f} s at the end")
    target = os.environ.get("ORCHGEN_SUITE_TIMES")
    if target:
        with open(target, "w") as f:
            json.dump(dict(ranked), f, indent=1)
