"""The telemetry orchgen writes, read by Prometheus's own promtool (issue 38): no cluster, no bring-up.

For every example bundle with a Slurm plane, as the example plans it and at each of Slurm's three sources of its
metrics (before 25.11 the bundle's exporter bringup/slurm_metrics.py writes them into the node exporter's textfile
directory; 25.11's slurmctld serves them on its own port but for the GPU counts, which the exporter still writes; from
26.05 slurmctld serves them all; on every release the exporter writes again what slurmctld serves, and its own count of
the jobs pending on resources or priority, which the idle-GPU alert reads):
- `promtool check config` on slurm/prometheus-slurm.yaml with its rule file beside it (the config names it under
  rule_files, so the rules load through the config as a Prometheus would load them), and `promtool check rules` on
  slurm/prometheus-slurm-rules.yaml, both with every lint fatal;
- `promtool test rules`: synthetic series shaped as the real scrapes give them (the exporter's metric names and
  `partition` label, templates/bringup/slurm_metrics.py and tests/test_bringup_real.py's _telemetry; checks/run.py
  --textfile's orchgen_nccl_socket_fallback; the node exporter's and slurmctld's `up`; the target labels the scrape
  config gives: job, instance, cluster), and each alert fires after its `for:` with its labels and summary, and does
  not fire on a healthy plane (jobs pending with every GPU allocated, idle GPUs with nothing pending, idle GPUs with
  only held, dependent or limited jobs pending, the backup controller's metrics endpoint down by design);
- every expression of slurm/grafana-slurm.json parsed by promtool (as recording rules);
- the text the exporter and the production checks write for the node exporter, through `promtool check metrics`.
And every Kubernetes-side rule group the bundles carry (kube-prometheus-stack's additionalPrometheusRulesMap, which
the chart copies verbatim into a PrometheusRule's spec.groups) through `promtool check rules`.

Consumer: promtool of Prometheus v3.14.0 (the Prometheus kube-prometheus-stack 88.5.3 runs), built from Go modules by
tests/promtool/build.sh (scripts/test.sh builds it when this file is selected)."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests import promtool
from tests._consumers import REPO, require
from tests.support import plan_of

EXAMPLES = REPO / "examples"
METRICS_SINCE = (25, 11)  # slurmctld's own metrics (MetricsType=metrics/openmetrics): Slurm 25.11+
GPU_METRICS_SINCE = (26, 5)  # ... and its GPU counts (Slurm's NEWS, 26.05.0rc1: "Add gpu statistics to metrics endpoints")
GPU_METRICS = ("slurm_partition_gpus", "slurm_partition_jobs_gpus_alloc")


def _promtool() -> str:
    path = promtool.binary()
    require(os.access(path, os.X_OK), f"promtool is not built ({path} missing): run tests/promtool/build.sh")
    return str(path)


def _run(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([_promtool(), *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))


@pytest.fixture(scope="module")
def bundles() -> dict[str, dict[str, bytes]]:
    """{"<example>@<slurm version>": bundle files} for every example (examples/ and its folders), plus the other side of 25.11 for those with a
    Slurm plane on bare metal (slurm/prometheus-slurm.yaml in the bundle)."""
    from generator.render import render

    out: dict[str, dict[str, bytes]] = {}
    for path in sorted(EXAMPLES.rglob("*.yaml")):  # multicluster/ too
        plan = plan_of(path)
        files = render(plan)
        version = plan.slurm_version
        out[f"{path.stem}@{version}"] = files
        if "slurm/prometheus-slurm.yaml" in files:
            # the three sources of Slurm's metrics: the exporter alone (before 25.11), slurmctld and the exporter for
            # the GPU counts (25.11), slurmctld alone (26.05+)
            for other in sorted({"22.05", "25.11", "26.05"} - {version}):
                out[f"{path.stem}@{other}"] = render(plan_of(path, slurm_version=other))
    return out


def _slurm(bundles) -> dict[str, dict[str, bytes]]:
    return {k: v for k, v in bundles.items() if "slurm/prometheus-slurm.yaml" in v}


def _write_slurm(files: dict[str, bytes], into: Path) -> Path:
    into.mkdir(parents=True)
    for name in ("prometheus-slurm.yaml", "prometheus-slurm-rules.yaml", "grafana-slurm.json", "slurm.conf"):
        (into / name).write_bytes(files[f"slurm/{name}"])
    return into


def test_every_slurm_bundle_and_both_sides_of_25_11_are_covered(bundles):
    slurm = _slurm(bundles)
    sides = {(_version(k.split("@")[1]) >= METRICS_SINCE, _version(k.split("@")[1]) >= GPU_METRICS_SINCE) for k in slurm}
    assert sides == {(False, False), (True, False), (True, True)} and len(slurm) >= 10, sorted(slurm)
    # the goldens' Slurm cases are among them, both sides
    goldens = {f"{case}@{v}" for case in ("fsdp-pretraining", "research-lab") for v in ("22.05", "25.11")}
    assert goldens <= set(slurm), sorted(slurm)


def test_promtool_checks_the_slurm_config_and_rules(bundles, tmp_path):
    """`promtool check config` (its rule file loaded through rule_files) and `promtool check rules`, every lint
    fatal, on each Slurm bundle's files as written; one promtool run for all of them."""
    dirs = [_write_slurm(files, tmp_path / name) for name, files in sorted(_slurm(bundles).items())]
    configs = [str(d / "prometheus-slurm.yaml") for d in dirs]
    out = _run(["check", "config", "--lint=all", "--lint-fatal", *configs])
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    text = out.stdout + out.stderr
    # each config is valid and loads its rule file (resolved beside it) with every rule
    assert text.count("SUCCESS: 1 rule files found") == len(dirs), text[-3000:]
    for d in dirs:
        n = len(yaml.safe_load((d / "prometheus-slurm-rules.yaml").read_text())["groups"][0]["rules"])
        assert f"SUCCESS: {d / 'prometheus-slurm.yaml'} is valid prometheus config file syntax" in text, text[-3000:]
        assert re.search(rf"Checking {re.escape(str(d / 'prometheus-slurm-rules.yaml'))}\n\s*SUCCESS: {n} rules found",
                         text), text[-3000:]
    rules = [str(d / "prometheus-slurm-rules.yaml") for d in dirs]
    out = _run(["check", "rules", "--lint=all", "--lint-fatal", *rules])
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert out.stdout.count("SUCCESS:") == len(dirs), out.stdout[-3000:]


def test_promtool_refuses_a_broken_rule(tmp_path):
    """The checks above can fail: a rule file with an expression that does not parse, and one whose `for` is not a
    duration, are refused (exit 1), each naming what is wrong."""
    (tmp_path / "expr.yaml").write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": [
        {"alert": "A", "expr": "max by (cluster) (slurm_nodes_drain > 0"}]}]}))
    (tmp_path / "for.yaml").write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": [
        {"alert": "B", "expr": "up == 0", "for": "ten minutes"}]}]}))
    out = _run(["check", "rules", str(tmp_path / "expr.yaml"), str(tmp_path / "for.yaml")])
    assert out.returncode == 1, out
    assert "unclosed left parenthesis" in out.stderr and "not a valid duration" in out.stderr, out.stderr


# --- promtool test rules: the alerts' behaviour on series shaped as the real scrapes give them -----------------------

def _targets(config: dict, job: str) -> list[str]:
    for j in config["scrape_configs"]:
        if j["job_name"] == job:
            return [t for sc in j["static_configs"] for t in sc["targets"]]
    return []


def _series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    inner = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return {"series": f"{name}{{{inner}}}", "values": values}


def _steps(*parts: tuple[float | None, int], stale: bool = False) -> str:
    """Values for promtool's input_series, one sample a minute: (value, minutes) held in turn; `None` is no sample.
    `stale`: then the staleness marker Prometheus writes when a series leaves its target's scrape, or the target's
    scrape fails (scrape/scrape.go: a failed scrape is appended empty "to trigger stale markers"); from there the
    series is gone. promtool's notation: `1x3` is four samples, `_x3` three."""
    out = " ".join(("_" + (f"x{n}" if n > 1 else "")) if v is None else f"{v:g}" + (f"x{n - 1}" if n > 1 else "")
                   for v, n in parts)
    return out + " stale" if stale else out


class Plane:
    """What the scrape config and slurm.conf of one bundle say the series look like after scraping. `hosts_down`:
    from that minute every controller's host is down: its node exporter's target fails (up 0) and everything scraped
    there goes stale, and so, with slurmctld's metrics, do its metrics endpoints and their slurm_* series."""

    MINUTES = 40  # each case's series: past the longest `for:` (30 m) and the stale alert's 27 m

    def __init__(self, d: Path, version: str, hosts_down: int | None = None):
        self.dir = d
        self.version = version
        self.config = yaml.safe_load((d / "prometheus-slurm.yaml").read_text())
        conf = (d / "slurm.conf").read_text()
        self.cluster = self.config["scrape_configs"][0]["static_configs"][0]["labels"]["cluster"]
        self.controllers = re.findall(r"^SlurmctldHost=([^(\s]+)", conf, re.M)
        self.partitions = re.findall(r"^PartitionName=(\S+)", conf, re.M)
        self.hosts = _targets(self.config, "slurm-node-exporter")
        self.native = bool(_targets(self.config, "slurm-nodes"))  # slurmctld serves slurm_* (25.11+)
        # the bundle's exporter on the controllers, on every release (issue 38: the only count of jobs pending on
        # resources or priority); it writes the slurm_* metrics too, beside slurmctld's own from 25.11
        self.exporter = True
        assert self.native == (_version(version) >= METRICS_SINCE), (version, self.native)
        self.hosts_down = hosts_down
        assert self.controllers and self.partitions and self.hosts

    def _held(self, value: float, on_controller: bool) -> str:
        n = self.MINUTES
        if on_controller and self.hosts_down is not None:
            return _steps((value, self.hosts_down), stale=True)
        return _steps((value, n))

    def _up(self, on_controller: bool, fails_from: int | None = None) -> str:
        n = self.MINUTES
        if on_controller and self.hosts_down is not None:
            fails_from = self.hosts_down if fails_from is None else min(fails_from, self.hosts_down)
        return _steps((1, fails_from), (0, n - fails_from)) if fails_from is not None else _steps((1, n))

    def node_labels(self, host: str) -> dict[str, str]:
        return {"job": "slurm-node-exporter", "instance": f"{host}:9100", "cluster": self.cluster}

    def ups(self, down: str | None = None, from_minute: int = 0, ctl_down_from: int | None = None) -> list[dict]:
        """`up` of the node exporters (controllers, then up to three more hosts: a 16k-node plane's every target
        adds nothing here), `down` failing from `from_minute`; with slurmctld's metrics, `up` of each of its jobs:
        the first controller answers, its backup stands by (down by design), and from `ctl_down_from` neither."""
        n = self.MINUTES
        named = [f"{c}:9100" for c in self.controllers]
        out = [_series("up", self.node_labels(h.rsplit(":", 1)[0]),
                       self._up(h in named, from_minute if h == down else None))
               for h in named + [h for h in self.hosts if h not in named][:3]]
        if self.native:
            for job in ("slurm-nodes", "slurm-jobs", "slurm-partitions", "slurm-scheduler"):
                for i, c in enumerate(self.controllers):
                    labels = {"job": job, "instance": f"{c}:6817", "cluster": self.cluster}
                    out.append(_series("up", labels, _steps((0, n)) if i else self._up(True, ctl_down_from)))
        return out

    def slurm(self, name: str, value: float, job: str, partition: str | None = None) -> list[dict]:
        """A slurm_* series where it is served: by slurmctld (the controller in control; `job` the scrape job of
        its path), or by the bundle's exporter on every controller (through its node exporter: job
        slurm-node-exporter, one series per controller, the same value)."""
        extra = {"partition": partition} if partition else {}
        out = []
        if self.native and (name not in GPU_METRICS or _version(self.version) >= GPU_METRICS_SINCE):
            c = self.controllers[0]
            out.append(_series(name, {"job": job, "instance": f"{c}:6817", "cluster": self.cluster, **extra},
                               self._held(value, True)))
        if self.exporter:
            out += [_series(name, {**self.node_labels(c), **extra}, self._held(value, True)) for c in self.controllers]
        return out

    def textfile(self, name: str, value: float | None, every_controller: bool = True) -> list[dict]:
        """An orchgen_* series of the controllers' textfile collector (the exporter on each controller; checks/run.py
        --textfile on the one that ran the checks: the first); `None`: the exporter's timestamp, the time it writes."""
        n = self.MINUTES
        ctls = self.controllers if every_controller else self.controllers[:1]
        if value is None:  # written every minute: its value is the time
            values = f"0+60x{self.hosts_down - 1} stale" if self.hosts_down is not None else f"0+60x{n - 1}"
        else:
            values = self._held(value, True)
        return [_series(name, self.node_labels(c), values) for c in ctls]

    def healthy(self, gpus: int = 8, alloc: int = 8, pending: int = 3, runnable: int | None = None) -> list[dict]:
        """A plane at work: every exporter up, no node drained, every partition's GPUs allocated with jobs pending
        (a busy plane, not an idle one), the checks' last NCCL run on RDMA, the exporter's file fresh. `runnable`:
        how many of the pending jobs wait on resources or priority (the exporter's count; default all)."""
        out = self.ups()
        out += self.slurm("slurm_nodes_drain", 0, "slurm-nodes")
        for p in self.partitions:
            out += self.slurm("slurm_partition_gpus", gpus, "slurm-partitions", p)
            out += self.slurm("slurm_partition_jobs_gpus_alloc", alloc, "slurm-partitions", p)
            out += self.slurm("slurm_partition_jobs_pending", pending, "slurm-partitions", p)
            # the exporter's own, on every controller (through its node exporter)
            out += [_series("orchgen_slurm_partition_jobs_pending_resources", {**self.node_labels(c), "partition": p},
                            self._held(pending if runnable is None else runnable, True)) for c in self.controllers]
        out += self.textfile("orchgen_nccl_socket_fallback", 0, every_controller=False)
        if self.exporter:
            out += self.textfile("orchgen_slurm_controllers_up", len(self.controllers))
            out += self.textfile("orchgen_slurm_metrics_timestamp_seconds", None)
        return out


def _replace(series: list[dict], name: str, values: str, **match: str) -> list[dict]:
    """`series` with the values of those named `name` (and carrying the labels `match`) replaced."""
    out = []
    for s in series:
        if s["series"].startswith(name + "{") and all(f'{k}="{v}"' in s["series"] for k, v in match.items()):
            s = {**s, "values": values}
        out.append(s)
    return out


def _alerts(rules: dict) -> dict[str, dict]:
    return {r["alert"]: r for g in rules["groups"] for r in g["rules"] if "alert" in r}


def _summary(rule: dict, value: str, **labels: str) -> dict[str, str]:
    """The annotations Prometheus renders for `rule`'s alert: its templates with $value and $labels filled in."""
    out = {}
    for k, v in rule["annotations"].items():
        v = v.replace("{{ $value }}", value)
        for name, label in labels.items():
            v = v.replace(f"{{{{ $labels.{name} }}}}", label)
        assert "{{" not in v, v
        out[k] = v
    return out


def _none(at: str, *alerts: str) -> list[dict]:
    return [{"eval_time": at, "alertname": a, "exp_alerts": []} for a in alerts]


def _unit_tests(plane: Plane, rules: dict) -> dict:
    """promtool's rule unit tests for one bundle: the healthy plane raises nothing; each failure raises its alert,
    not before its `for:` has passed, with the labels and summary Prometheus gives it."""
    n = plane.MINUTES
    alerts = _alerts(rules)
    names = sorted(alerts)
    expected = {"SlurmNodesDrained", "SlurmGPUsPendingWhileIdle", "SlurmControllerDown", "SlurmNCCLOnSockets",
                "SlurmHostExporterDown"} | ({"SlurmMetricsStale"} if plane.exporter else set())
    assert set(names) == expected, names
    c, p = plane.cluster, plane.partitions[-1]
    warn, crit = {"cluster": c, "severity": "warning"}, {"cluster": c, "severity": "critical"}
    tests = []

    # healthy: busy GPUs with jobs pending, the backup controller standing by: nothing fires, early or late
    tests.append({"name": f"{c}: healthy plane", "interval": "1m", "input_series": plane.healthy(),
                  "alert_rule_test": _none("20m", *names) + _none(f"{n - 1}m", *names)})
    # idle GPUs and nothing pending: no alert either (a quiet plane is not a stuck one)
    tests.append({"name": f"{c}: idle GPUs, nothing pending", "interval": "1m",
                  "input_series": plane.healthy(alloc=2, pending=0),
                  "alert_rule_test": _none(f"{n - 1}m", *names)})

    # two nodes drained from minute 10 (seen by both controllers' exporters: one alert), 15 m before it fires
    drained = _replace(plane.healthy(), "slurm_nodes_drain", _steps((0, 10), (2, n - 10)))
    tests.append({"name": f"{c}: nodes drained", "interval": "1m", "input_series": drained,
                  "alert_rule_test": _none("24m", "SlurmNodesDrained") + [
                      {"eval_time": "26m", "alertname": "SlurmNodesDrained",
                       "exp_alerts": [{"exp_labels": warn,
                                       "exp_annotations": _summary(alerts["SlurmNodesDrained"], "2")}]}]})

    # jobs pending in partition p while 5 of its 8 GPUs are idle, for 30 m; the other partitions busy (all
    # allocated, jobs pending): only p is named
    idle = _replace(plane.healthy(), "slurm_partition_jobs_gpus_alloc", _steps((3, n)), partition=p)
    tests.append({"name": f"{c}: jobs pending while GPUs idle", "interval": "1m", "input_series": idle,
                  "alert_rule_test": _none("29m", "SlurmGPUsPendingWhileIdle") + [
                      {"eval_time": "31m", "alertname": "SlurmGPUsPendingWhileIdle",
                       "exp_alerts": [{"exp_labels": {**warn, "partition": p},
                                       "exp_annotations": _summary(alerts["SlurmGPUsPendingWhileIdle"], "5",
                                                                   partition=p)}]}]})
    # the same GPUs idle, but the 3 jobs pending there cannot start on them (held, waiting on a dependency or a
    # limit: squeue's reasons JobHeldUser, Dependency, QOSGrpGRES): Slurm counts them pending, the exporter's count of
    # jobs waiting on resources or priority is 0, and nothing fires
    held = _replace(plane.healthy(runnable=0), "slurm_partition_jobs_gpus_alloc", _steps((3, n)), partition=p)
    tests.append({"name": f"{c}: idle GPUs, only held or dependent jobs pending", "interval": "1m",
                  "input_series": held, "alert_rule_test": _none("31m", *names) + _none(f"{n - 1}m", *names)})
    # the same, the pending job started at minute 20 (pending gone): never fires
    idle_short = _replace(idle, "slurm_partition_jobs_pending", _steps((2, 20), (0, n - 20)), partition=p)
    idle_short = _replace(idle_short, "orchgen_slurm_partition_jobs_pending_resources", _steps((2, 20), (0, n - 20)),
                          partition=p)
    tests.append({"name": f"{c}: idle GPUs while a job pends for 20 m", "interval": "1m", "input_series": idle_short,
                  "alert_rule_test": _none("31m", "SlurmGPUsPendingWhileIdle") + _none(f"{n - 1}m", *names)})

    # no slurmctld answers from minute 10 (the daemons stopped, the hosts up)
    # (the exporter's fall back writes no slurm_* and no orchgen_slurm_partition_*: those series go stale)
    if plane.native:  # slurmctld's metrics endpoints fail on both; their slurm_* series go stale
        down = [s for s in plane.healthy() if not s["series"].startswith(("up{", "slurm_", "orchgen_slurm_partition_"))]
        down += plane.ups(ctl_down_from=10)
        down += [{**s, "values": _steps((0, 10), stale=True)}
                 for s in plane.slurm("slurm_nodes_drain", 0, "slurm-nodes")]
        if plane.exporter:  # and the exporter beside them says so too
            down = [s for s in down if not s["series"].startswith("orchgen_slurm_controllers_up")]
            down += [{**s, "values": _steps((len(plane.controllers), 10), (0, n - 10))}
                     for s in plane.textfile("orchgen_slurm_controllers_up", 0)]
    else:  # the exporter's fall back: orchgen_slurm_controllers_up 0 and a fresh timestamp, its slurm_* series gone
        down = [s for s in plane.healthy()
                if not s["series"].startswith(("slurm_", "orchgen_slurm_controllers_up", "orchgen_slurm_partition_"))]
        down += [{**s, "values": _steps((len(plane.controllers), 10), (0, n - 10))}
                 for s in plane.textfile("orchgen_slurm_controllers_up", 0)]
        down += [{**s, "values": _steps((0, 10), stale=True)}
                 for s in plane.slurm("slurm_nodes_drain", 0, "slurm-nodes")]
    tests.append({"name": f"{c}: slurmctld down", "interval": "1m", "input_series": down,
                  "alert_rule_test": _none("14m", "SlurmControllerDown") + [
                      {"eval_time": "16m", "alertname": "SlurmControllerDown",
                       "exp_alerts": [{"exp_labels": crit,
                                       "exp_annotations": _summary(alerts["SlurmControllerDown"], "0")}]},
                      # nothing else fires on a controller outage: no drain, no idle-GPU alert from missing series
                      *_none("16m", "SlurmNodesDrained", "SlurmGPUsPendingWhileIdle", "SlurmNCCLOnSockets")]})

    # every controller's host down from minute 10 (Plane's hosts_down): the critical alert fires all the same, beside
    # each controller host's SlurmHostExporterDown after its 10 m
    gone_ctl = Plane(plane.dir, plane.version, hosts_down=10)
    hosts = [{**warn, "job": "slurm-node-exporter", "instance": f"{h}:9100"} for h in plane.controllers]
    tests.append({"name": f"{c}: controller hosts down", "interval": "1m", "input_series": gone_ctl.healthy(),
                  "alert_rule_test": _none("14m", "SlurmControllerDown") + [
                      {"eval_time": "16m", "alertname": "SlurmControllerDown",
                       "exp_alerts": [{"exp_labels": crit, "exp_annotations": _summary(
                           alerts["SlurmControllerDown"], "0" if plane.native else "1")}]},  # up == 0; absent()'s 1
                      {"eval_time": "21m", "alertname": "SlurmHostExporterDown",
                       "exp_alerts": [{"exp_labels": h, "exp_annotations": _summary(
                           alerts["SlurmHostExporterDown"], "0", instance=h["instance"])} for h in hosts]},
                      *_none("21m", "SlurmMetricsStale", "SlurmNodesDrained", "SlurmGPUsPendingWhileIdle")]})

    # the last NCCL check fell back to sockets (checks/run.py --textfile at minute 5): at once, no `for`
    nccl = _replace(plane.healthy(), "orchgen_nccl_socket_fallback", _steps((None, 5), (1, n - 5)))
    tests.append({"name": f"{c}: NCCL on sockets", "interval": "1m", "input_series": nccl,
                  "alert_rule_test": _none("4m", "SlurmNCCLOnSockets") + [
                      {"eval_time": "5m", "alertname": "SlurmNCCLOnSockets",
                       "exp_alerts": [{"exp_labels": crit,
                                       "exp_annotations": _summary(alerts["SlurmNCCLOnSockets"], "1")}]}]})

    # a node's exporter down from minute 10 (the host down): that instance, after 10 m
    host = next(h for h in plane.hosts if h.rsplit(":", 1)[0] not in plane.controllers)
    gone = [s for s in plane.healthy() if not s["series"].startswith("up{")] + plane.ups(down=host, from_minute=10)
    labels = {**warn, "job": "slurm-node-exporter", "instance": host}
    tests.append({"name": f"{c}: a host's exporter down", "interval": "1m", "input_series": gone,
                  "alert_rule_test": _none("19m", "SlurmHostExporterDown") + [
                      {"eval_time": "21m", "alertname": "SlurmHostExporterDown",
                       "exp_alerts": [{"exp_labels": labels, "exp_annotations": _summary(
                           alerts["SlurmHostExporterDown"], "0", instance=host)}]}]})

    if plane.exporter:
        # the exporter's file stops being refreshed at minute 10 (the node exporter still serves the old one):
        # more than 600 s old from minute 21, firing 5 m later; $value is its age in seconds
        stale = _replace(plane.healthy(), "orchgen_slurm_metrics_timestamp_seconds", f"0+60x10 600x{n - 12}")
        tests.append({"name": f"{c}: Slurm metrics stale", "interval": "1m", "input_series": stale,
                      "alert_rule_test": _none("25m", "SlurmMetricsStale") + [
                          {"eval_time": "27m", "alertname": "SlurmMetricsStale",
                           "exp_alerts": [{"exp_labels": warn, "exp_annotations": _summary(
                               alerts["SlurmMetricsStale"], str(27 * 60 - 600))}]}]})
    return {"rule_files": ["prometheus-slurm-rules.yaml"], "evaluation_interval": "1m", "tests": tests}


def test_slurm_alerts_fire_when_they_should_and_not_otherwise(bundles, tmp_path):
    """`promtool test rules` per Slurm bundle, before 25.11, at 25.11 and from 26.05 (one promtool run for all)."""
    files = []
    for name, b in sorted(_slurm(bundles).items()):
        d = _write_slurm(b, tmp_path / name)
        plane = Plane(d, name.split("@")[1])
        rules = yaml.safe_load((d / "prometheus-slurm-rules.yaml").read_text())
        (d / "alerts.test.yaml").write_text(yaml.safe_dump(_unit_tests(plane, rules), sort_keys=False))
        files.append(str(d / "alerts.test.yaml"))
    out = _run(["test", "rules", *files])
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert out.stdout.count("  SUCCESS") == len(files), out.stdout[-3000:]


def test_the_alert_tests_can_fail(bundles, tmp_path):
    """The unit tests above can fail: SlurmGPUsPendingWhileIdle without its `for:` fires at once, where the test
    expects nothing before 30 m; and one that counts every pending job fires on idle GPUs with only held or
    dependent jobs pending."""
    name, b = next((k, v) for k, v in sorted(_slurm(bundles).items()) if k.startswith("research-lab@22.05"))
    d = _write_slurm(b, tmp_path / name)
    rules_text = (d / "prometheus-slurm-rules.yaml").read_text()
    rules = yaml.safe_load(rules_text)
    (d / "alerts.test.yaml").write_text(yaml.safe_dump(_unit_tests(Plane(d, "22.05"), rules), sort_keys=False))
    assert "        for: 30m\n" in rules_text
    (d / "prometheus-slurm-rules.yaml").write_text(rules_text.replace("        for: 30m\n", "", 1))
    out = _run(["test", "rules", str(d / "alerts.test.yaml")])
    assert out.returncode == 1 and "alertname: SlurmGPUsPendingWhileIdle, time: 29m" in out.stderr, out
    # and the alert on Slurm's count of every pending job (held and dependent ones too: slurm_partition_jobs_pending,
    # what 26.05's slurmctld serves) fires where only held or dependent jobs pend on idle GPUs
    assert "orchgen_slurm_partition_jobs_pending_resources" in rules_text
    (d / "prometheus-slurm-rules.yaml").write_text(
        rules_text.replace("orchgen_slurm_partition_jobs_pending_resources", "slurm_partition_jobs_pending"))
    out = _run(["test", "rules", str(d / "alerts.test.yaml")])
    assert out.returncode == 1 and "idle GPUs, only held or dependent jobs pending" in out.stderr and \
        "alertname: SlurmGPUsPendingWhileIdle, time: 31m" in out.stderr, out


def test_the_dashboard_expressions_parse(bundles, tmp_path):
    """Each panel query of slurm/grafana-slurm.json, as a recording rule promtool checks: it parses as PromQL (Grafana
    sends it to Prometheus unchanged; its ${datasource} is the panel's datasource, not in the query)."""
    seen = 0
    files = []
    for name, b in sorted(_slurm(bundles).items()):
        board = json.loads(b["slurm/grafana-slurm.json"])
        exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
        assert exprs and not any("$" in e for e in exprs), exprs
        group = {"name": "dashboard", "rules": [{"record": f"orchgen:dashboard:q{i}", "expr": e}
                                                for i, e in enumerate(exprs)]}
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump({"groups": [group]}))
        files.append(str(tmp_path / f"{name}.yaml"))
        seen += len(exprs)
    out = _run(["check", "rules", "--lint=all", "--lint-fatal", *files])
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert sum(int(n) for n in re.findall(r"SUCCESS: (\d+) rules found", out.stdout)) == seen


def _load(path: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"orchgen_bundle_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_exporters_text_passes_promtool_check_metrics(tmp_path, monkeypatch):
    """What the series above stand for, linted by `promtool check metrics` (the exposition format and Prometheus's
    naming rules): the bundle's Slurm exporter (bringup/slurm_metrics.py) on the outputs of sinfo and squeue as
    tests/test_bringup_real.py's loopback cluster gives them (two nodes of 2 GPUs in partitions a100 and all, one
    1-GPU job running, a 2-node job pending on Resources beside a held one and one waiting on a dependency, which
    the count of jobs pending on resources or priority leaves out), its fall back when no controller answers, and the
    production checks' textfile (checks.py write_textfile: orchgen_check_ok, orchgen_nccl_socket_fallback)."""
    bringup = REPO / "templates" / "bringup"
    exporter = _load(bringup / "slurm_metrics.py")
    answers = {"scontrol": "Slurmctld(primary) at ctl1 is UP\n",
               "sinfo": "gpu01|a100|gpu:2(S:0-1)|mix\ngpu02|a100|gpu:2(S:0-1)|idle\n"
                        "gpu01|all*|gpu:2(S:0-1)|mix\ngpu02|all*|gpu:2(S:0-1)|plnd\n",
               "squeue": "all|RUNNING|1|gres/gpu:1|None\nall|PENDING|2|gres/gpu:2|Resources\n"
                         "all|PENDING|1|gres/gpu:1|JobHeldUser\nall|PENDING|1|gres/gpu:1|Dependency\n"}
    monkeypatch.setattr(exporter, "run", lambda argv: answers[argv[0]])
    (tmp_path / "up").mkdir()
    assert exporter.main(["--out", str(tmp_path / "up")]) == 0

    def refuse(argv):
        raise subprocess.CalledProcessError(1, argv)

    monkeypatch.setattr(exporter, "run", refuse)
    (tmp_path / "down").mkdir()
    assert exporter.main(["--out", str(tmp_path / "down")]) == 0
    checks = _load(bringup / "checks.py")
    checks.write_textfile(str(tmp_path / "checks.prom"), {"gres": {"ok": True}, "health": {"ok": None},
                                                          "nccl": {"ok": False, "socket_fallback": True}})
    texts = {"exporter": (tmp_path / "up" / exporter.FILE).read_text(),
             "exporter, controllers down": (tmp_path / "down" / exporter.FILE).read_text(),
             "checks": (tmp_path / "checks.prom").read_text()}
    assert 'slurm_partition_jobs_gpus_alloc{partition="all"} 1' in texts["exporter"], texts["exporter"]
    assert 'slurm_partition_jobs_pending{partition="all"} 3' in texts["exporter"], texts["exporter"]
    assert 'orchgen_slurm_partition_jobs_pending_resources{partition="all"} 1' in texts["exporter"], texts["exporter"]
    assert "orchgen_slurm_controllers_up 0" in texts["exporter, controllers down"]
    assert "orchgen_nccl_socket_fallback 1" in texts["checks"]
    for what, text in texts.items():
        out = subprocess.run([_promtool(), "check", "metrics"], input=text, capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0 and not out.stdout.strip() and not out.stderr.strip(), (what, out, text)
    # and the lint can fail: a counter without the _total suffix
    bad = "# HELP x_requests Requests.\n# TYPE x_requests counter\nx_requests 1\n"
    out = subprocess.run([_promtool(), "check", "metrics"], input=bad, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "_total" in out.stdout + out.stderr, out


# --- the Kubernetes side: kube-prometheus-stack's additionalPrometheusRulesMap, a PrometheusRule each ----------------

def _rule_maps(node) -> list[dict]:
    """Every additionalPrometheusRulesMap in a parsed YAML document (the values file, or the same values inside a
    GitOps object), and the spec of every PrometheusRule."""
    found: list[dict] = []
    if isinstance(node, dict):
        if node.get("kind") == "PrometheusRule" and isinstance(node.get("spec"), dict):
            found.append({"groups": node["spec"].get("groups", [])})
        for k, v in node.items():
            if k == "additionalPrometheusRulesMap" and isinstance(v, dict):
                found += [{"groups": rule["groups"]} for rule in v.values()]
            elif isinstance(v, str) and "additionalPrometheusRulesMap" in v:  # values given as a YAML string
                found += [r for doc in yaml.safe_load_all(v) for r in _rule_maps(doc)]
            else:
                found += _rule_maps(v)
    elif isinstance(node, list):
        for v in node:
            found += _rule_maps(v)
    return found


def test_kubernetes_prometheus_rules_check(bundles, tmp_path):
    """`promtool check rules` (every lint fatal) on each rule group the bundles hand kube-prometheus-stack, as the
    chart puts it into a PrometheusRule's spec.groups (toYaml, unchanged) and the Prometheus Operator into a rule
    file."""
    files = []
    for name, b in sorted(bundles.items()):
        for rel, data in sorted(b.items()):
            if not rel.endswith((".yaml", ".yml")) or (b"additionalPrometheusRulesMap" not in data
                                                         and b"PrometheusRule" not in data):
                continue
            for i, spec in enumerate(r for doc in yaml.safe_load_all(data) for r in _rule_maps(doc)):
                path = tmp_path / f"{name}--{rel.replace('/', '--')}--{i}.yaml"
                path.write_text(yaml.safe_dump(spec))
                files.append(str(path))
    # every Kubernetes example's, each cluster's of a plane beyond one cluster
    assert len(files) >= 15 and any("clusters--worker-01" in f for f in files), files
    out = _run(["check", "rules", "--lint=all", "--lint-fatal", *files])
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert out.stdout.count("SUCCESS:") == len(files)


def _fabric_rules(files: dict[str, bytes]) -> dict:
    """The bundle's orchgen-fabric rule group, as kube-prometheus-stack gets it (the values' rule map)."""
    for rel, data in sorted(files.items()):
        if rel.endswith((".yaml", ".yml")) and b"additionalPrometheusRulesMap" in data:
            for spec in (r for doc in yaml.safe_load_all(data) for r in _rule_maps(doc)):
                groups = [g for g in spec["groups"] if g["name"] == "orchgen-fabric"]
                if groups:
                    return {"groups": groups}
    raise AssertionError("no orchgen-fabric rule group in the bundle")


def _fabric_unit_tests(efa: bool) -> dict:
    """Series as the bundle's ServiceMonitors give them (the `node` label from the pod's node, metrics.py
    NODE_RELABELING): dcgm-exporter's DCGM_FI_DEV_GPU_UTIL per GPU and its NVLink counter, and the fabric's byte
    counters: on InfiniBand/RoCE node_exporter's infiniband collector (port_data_*_bytes_total), on EFA the EFA node
    exporter's node_amazonefa_{rx,tx}_bytes. Nodes: `stuck` (GPUs busy, fabric flat: a socket fallback), `healthy`
    (GPUs busy, 100 MB/s on the fabric and on NVLink), `idle` (GPUs idle, fabric flat), and on EFA `unseen` (GPUs
    reported, no EFA exporter there)."""
    n = 40
    rx, tx = (("node_amazonefa_rx_bytes", "node_amazonefa_tx_bytes") if efa else
              ("node_infiniband_port_data_received_bytes_total", "node_infiniband_port_data_transmitted_bytes_total"))
    series = []
    for node, util, bytes_per_min in (("stuck", 90, 0), ("healthy", 90, 6e9), ("idle", 0, 0), ("unseen", 90, None)):
        if node == "unseen" and not efa:
            continue
        for gpu in ("0", "1"):
            series.append(_series("DCGM_FI_DEV_GPU_UTIL", {"node": node, "gpu": gpu}, f"{util}x{n}"))
            nvlink = 6e9 if node == "healthy" else 0
            series.append(_series("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", {"node": node, "gpu": gpu}, f"0+{nvlink:g}x{n}"))
        if bytes_per_min is not None:
            dev = {"node": node, "device": "rdmap0s0" if efa else "mlx5_0"} | ({} if efa else {"port": "1"})
            series += [_series(m, dev, f"0+{bytes_per_min:g}x{n}") for m in (rx, tx)]
    summary = ("{node}: GPUs busy and its " + ("EFA interfaces" if efa else "RDMA ports") + " under 1 MB/s: a multi-node "
               "job there runs NCCL over TCP (the MFU regression of a socket fallback; check NCCL_DEBUG=INFO for NET/Socket)")
    rdma = {"exp_labels": {"severity": "warning", "node": "stuck"}, "exp_annotations": {"summary": summary.format(node="stuck")}}
    nvlink = [{"exp_labels": {"severity": "warning", "node": node}, "exp_annotations": {"summary": (
        f"{node}: several GPUs busy and no NVLink traffic (P2P off or NVLink down: collectives go over PCIe)")}}
        for node in (["stuck", "unseen"] if efa else ["stuck"])]
    cases = [{"eval_time": "12m", "alertname": "RDMAIdleWhileGPUsBusy", "exp_alerts": []},  # not before its 15 m
             {"eval_time": "25m", "alertname": "RDMAIdleWhileGPUsBusy", "exp_alerts": [rdma]},
             {"eval_time": "25m", "alertname": "NVLinkIdleWhileGPUsBusy", "exp_alerts": nvlink}]
    if efa:  # the node without EFA counters: told after 30 m, and RDMAIdleWhileGPUsBusy cannot see it (above)
        cases += [{"eval_time": "25m", "alertname": "EFAMetricsMissing", "exp_alerts": []},
                  {"eval_time": "35m", "alertname": "EFAMetricsMissing", "exp_alerts": [
                      {"exp_labels": {"severity": "info", "node": "unseen"}, "exp_annotations": {"summary": (
                          "unseen: GPUs reported but no EFA counters (node_amazonefa_*): RDMAIdleWhileGPUsBusy cannot "
                          "see this node; run the EFA node exporter (aws-samples/awsome-distributed-training "
                          "3.efa-node-exporter) on the EFA pools")}}]}]
    return {"rule_files": ["rules.yaml"], "evaluation_interval": "1m",
            "tests": [{"name": "fabric", "interval": "1m", "input_series": series, "alert_rule_test": cases}]}


def test_kubernetes_fabric_alerts_fire_when_they_should_and_not_otherwise(bundles, tmp_path):
    """Issue 34 (the RDMA alert's EFA form): `promtool test rules` on the fabric rules of an InfiniBand/RoCE bundle
    and of an EFA one, as kube-prometheus-stack gets them: a node whose GPUs are busy while its fabric carries nothing
    alerts after 15 minutes; a busy node with traffic, and an idle one, do not; on EFA a node with GPUs but no EFA
    counters is named after 30 minutes. And the test can fail: the EFA rules read with InfiniBand's series never see
    the stuck node."""
    cases = {"baremetal-k8s-training": False, "eks-training": True}
    files = []
    for example, efa in cases.items():
        name, b = next((k, v) for k, v in sorted(bundles.items()) if k.split("@")[0] == example)
        d = tmp_path / example
        d.mkdir()
        (d / "rules.yaml").write_text(yaml.safe_dump(_fabric_rules(b)))
        (d / "fabric.test.yaml").write_text(yaml.safe_dump(_fabric_unit_tests(efa), sort_keys=False))
        files.append(str(d / "fabric.test.yaml"))
    out = _run(["test", "rules", *files])
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert out.stdout.count("  SUCCESS") == len(files), out.stdout[-3000:]
    # EFA's rules against InfiniBand-shaped series: no RDMA alert for the stuck node, so the test above fails
    d = tmp_path / "eks-training"
    (d / "fabric.test.yaml").write_text(yaml.safe_dump(_fabric_unit_tests(False), sort_keys=False))
    out = _run(["test", "rules", str(d / "fabric.test.yaml")])
    assert out.returncode == 1 and "alertname: RDMAIdleWhileGPUsBusy, time: 25m" in out.stderr, out
