"""`orchgen import slurm` proved in the real Slurm (issue 22): for each public GPU site in
tests/data/sites/, the original configuration and plan(import(original)) are booted, each once, on
the host's Slurm 22.05 (and one on 26.05, in its chroot) through the same loopback overlay (tests/slurmharness/overlay.py), and what
slurmctld took from them is compared: `scontrol show config`, `scontrol show nodes`, `scontrol show
partition`. The only differences allowed are generator.adopt.ORCHGEN_BETTER (keys orchgen writes on
purpose where the site set nothing; docs/slurm-admins.md). Jobs with the site's own
partition names and GRES strings get the same answer from both.

"The original" is the site's files as Slurm 22.05 reads them: where a file uses a key 22.05 refuses
(SLAC's AccountingStoreJobComment, removed in 21.08), the one rewrite `import` itself prints
(generator.adopt.OBSOLETE) is applied first, and the cgroup.conf keys the import refuses as no longer used
(generator.adopt.CGROUP_IGNORED: DeepOps' CgroupReleaseAgentDir, fatal to 24.11) are left out; the test data
is otherwise unchanged.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from generator.adopt import CGROUP_IGNORED, OBSOLETE, ORCHGEN_BETTER, ORCHGEN_BETTER_NODES
from generator.spec import slurmconf
from tests.slurmharness import SlurmCluster, require_slurm
from tests.support import orchgen_argv

SITES = Path(__file__).parent / "data" / "sites"

# `scontrol show config` lines that name the boot, not the configuration (times, the config file's
# path, the host's own values) or that the harness sets from the work dir for both boots alike
_RUNTIME = {"BOOT_TIME", "SLURM_CONF", "SLURM_VERSION", "NEXT_JOB_ID", "Configuration data as of",
            "SLURMCTLD_PORT", "SlurmctldPort", "SlurmdPort", "MULTIPLE_SLURMD", "HASH_VAL"}

# For each site: jobs (sbatch arguments) that use its own partition names and GRES strings.
JOBS = {
    "slac": [["-p", "ml", "--gres=gpu:geforce_rtx_2080_ti:2", "-A", "shared"],
             ["-p", "shared", "--gres=gpu:v100:4", "-A", "shared"],
             ["-p", "cryoem", "--gres=gpu:1", "-A", "shared", "-t", "2-00:00:00"]],
    "nvidia-dgx": [["-p", "debug", "--gres=gpu:8"], ["--gres=gpu:2", "-c", "4"]],
    # NVIDIA DeepOps: two DGX A100 on `Nodes=ALL`, GPU-CPU affinity in gres.conf, Procs= beside CPUs=
    "deepops": [["-p", "batch", "--gres=gpu:8", "--exclusive"], ["--gres=gpu:2", "-c", "16", "--mem=64G"]],
    # ParallelCluster: partitions over NodeSets (`PartitionName=gpu Nodes=gpu_nodes`), the node features its
    # generator writes, the controller's address (SlurmctldHost=name(addr)) and AuthInfo=cred_expire=70
    "parallelcluster": [["-p", "gpu", "--gres=gpu:v100:8"], ["-p", "gpu", "--gres=gpu:m60:2", "-C", "static"],
                        ["-p", "efa", "-C", "efa", "-c", "36"]],
    # Google Cluster Toolkit (slurm-gcp v6): NodeName=DEFAULT per nodeset, State=CLOUD, partitions over NodeSets
    # (one by Feature= that no node has: the login partition), an `include`, topology.conf per nodeset, Prolog
    # and Epilog globs, AuthType=auth/slurm (23.11+)
    "slurm-gcp": [["-p", "a2", "--gres=gpu:8"], ["-p", "debug", "-c", "2"], ["--gres=gpu:1", "--mem=8G"]],
    # FIUBA (Universidad de Buenos Aires): CPU nodes on three lines out of order under one partition, gang scheduling
    "fiuba": [["-p", "normal", "-n", "16"], ["-N", "2", "--mem=8G", "-t", "12:00:00"], ["-n", "4", "--oversubscribe"]],
    "import-edge": [["-p", "short", "--gres=gpu:GV100GL:4", "-t", "04:00:00"], ["-p", "long", "-t", "3-00:00:00"],
                    ["-p", "gpu", "--gres=gpu:t4:1", "-C", "mixed"], ["--gres=gpu:a100:2"],
                    ["-p", "gpu", "--switches=1", "-N2", "--gres=gpu:4"], ["-p", "racks", "-N", "5", "-n", "20"]],
}


# Sites whose jobs are accepted on loopback. SLAC's job_submit.lua asks sacctmgr for the submitting
# user and refuses the job when that fails; its slurmdbd cannot run on 22.05 either: sacctmgr and
# slurmdbd refuse its AccountingStorageEnforce=associations,limit,qos ("Invalid parameter ...: limit";
# `limits` is the word). So its jobs are held to the same answer from both configurations (the lua's
# refusal), not to acceptance; the overlay runs it without slurmdbd.
ACCEPTED = {"deepops", "fiuba", "nvidia-dgx", "import-edge", "parallelcluster", "slurm-gcp"}


def _original(site: str, into: Path) -> Path:
    """The site's files as Slurm 22.05 reads them (OBSOLETE's rewrites of keys 22.05 refuses)."""
    shutil.copytree(SITES / site if (SITES / site).is_dir() else SITES.parent / site, into,
                    ignore=shutil.ignore_patterns("SOURCE.md"))
    for conf in into.glob("*.conf"):
        text = conf.read_text()
        for key, (new, _) in OBSOLETE.items():
            if new is not None:
                text = re.sub(rf"(?im)^{key}=\S*", new, text)
        if conf.name == "cgroup.conf":  # keys the import refuses as no longer used (DeepOps' CgroupReleaseAgentDir,
            for key in CGROUP_IGNORED:  # fatal to 24.11)
                text = re.sub(rf"(?im)^{key}=.*$", "", text)
        conf.write_text(text)
    return into


def _inlined(original: Path, into: Path) -> Path:
    """The original with each `Include` of slurm.conf replaced by the file's lines, as Slurm reads it
    (an Include is textual): the overlay adapts the node lines of slurm.conf itself only."""
    shutil.copytree(original, into)
    conf = into / "slurm.conf"

    def lines_of(path: Path) -> list[str]:  # Includes inside Includes too (ParallelCluster nests two deep)
        out = []
        for line in path.read_text().splitlines():
            m = re.match(r"(?i)^include\s+(\S+)", line)
            out += lines_of(original / Path(m.group(1)).name) if m else [line]
        return out

    conf.write_text("\n".join(lines_of(conf)) + "\n")
    return into


# What `validate` finds in a site's own files, carried verbatim by the import: each a real defect of the site.
# SLAC's two controllers keep StateSaveLocation under /var/lib, each host's own (a takeover loses the jobs).
# (Its gres.conf also gives hep-gpu01 two Titan Xp its NodeName line does not: a warning, as slurmctld ignores
# GRES beyond the configured ones, gres.c "Ignoring excess count".)
VALIDATE_FINDS = {"slac": ["2 SlurmctldHost lines, but StateSaveLocation=/var/lib/slurmd"]}


def _regenerated(original: Path, work: Path, version: str) -> Path:
    work.mkdir()
    orchgen = orchgen_argv()
    done = subprocess.run([*orchgen, "import", "slurm", str(original / "slurm.conf"), "--slurm-version", version,
                           "-o", str(work / "workload.yaml")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([*orchgen, "plan", str(work / "workload.yaml"), "-o", str(work / "out"), "-q"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # validate accepts the import's next step, but for what it finds in the site's own files (VALIDATE_FINDS)
    done = subprocess.run([*orchgen, "validate", str(work / "out"), "--no-fetch"], capture_output=True, text=True)
    errors = [line for line in done.stdout.splitlines() if re.match(r"slurm/\S+:\d+: (?!warning: )", line)]
    found = VALIDATE_FINDS.get(original.name if original.name in VALIDATE_FINDS else "", [])
    assert [e for e in errors if not any(f in e for f in found)] == [] and done.returncode == (1 if found else 0), \
        done.stdout + done.stderr
    return work / "out" / "slurm"


def _snapshot(c: SlurmCluster, site: str) -> dict:
    config = {k: v.replace(str(c.workdir), "<work>") for k, v in c.config().items() if k not in _RUNTIME}
    nodes = {n: {k: v for k, v in d["raw"].items()
                 if k not in ("BootTime", "SlurmdStartTime", "LastBusyTime", "ResumeAfterTime", "Port",
                              "NodeAddr", "NodeHostName", "Version", "OS", "RealMemory" if False else "_",
                              "CPULoad", "FreeMem", "Reason", "CurrentWatts", "AveWatts", "LastBusyTime")}
             for n, d in c.nodes().items()}
    parts = {p: d["raw"] for p, d in c.partitions().items()}
    jobs = []
    for args in JOBS[site]:
        done = c.run("sbatch", "--test-only", "-N1", *args, "--wrap", "true", check=False)
        # the answer, not when it would start: "Job N to start at T using C processors on nodes X in partition P"
        # (lines about an optional SPANK plugin this host lacks, pyxis, are the harness's: see problems())
        text = "\n".join(line for line in (done.stdout + done.stderr).strip().splitlines()
                         if not any(p in line for p in c.optional_plugins_absent()) and "spank: " not in line)
        answer = re.sub(r"Job \d+ to start at \S+", "Job to start", text)
        jobs.append((args, done.returncode, re.sub(r"\s+on nodes \S+", "", answer)))
    # the fabric as slurmctld holds it (tree switches: level, nodes, children); only a site with a topology
    # has one to compare (without, orchgen's one leaf per pool is ORCHGEN_BETTER's TopologyPlugin)
    etc = c.workdir / "etc"
    topology = c.switches() if (etc / "topology.conf").exists() or (etc / "topology.yaml").exists() else None
    return {"config": config, "nodes": nodes, "partitions": parts, "jobs": jobs, "topology": topology}


def _differences(a: dict, b: dict, site_keys: set[str]) -> list[str]:
    """What differs, less ORCHGEN_BETTER's keys where the site did not set them (`site_keys`, lower case)."""
    out = []
    for key in sorted(set(a["config"]) | set(b["config"])):
        better = _config_key(key) in ORCHGEN_BETTER and _config_key(key).lower() not in site_keys
        if a["config"].get(key) != b["config"].get(key) and not better:
            out.append(f"config {key}: {a['config'].get(key)!r} -> {b['config'].get(key)!r}")
    for kind in ("nodes", "partitions"):
        for name in sorted(set(a[kind]) | set(b[kind])):
            x, y = a[kind].get(name, {}), b[kind].get(name, {})
            for key in sorted(set(x) | set(y)):
                if x.get(key) != y.get(key) and not (kind == "nodes" and _node_better(key, x.get(key))):
                    out.append(f"{kind} {name} {key}: {x.get(key)!r} -> {y.get(key)!r}")
    if a["topology"] is not None and a["topology"] != b["topology"]:
        out.append(f"topology: {a['topology']!r} -> {b['topology']!r}")
    for x, y in zip(a["jobs"], b["jobs"]):
        if x != y:
            out.append(f"job {' '.join(x[0])}: {x[1:]} -> {y[1:]}")
    return out


def _node_better(key: str, before: str | None) -> bool:
    """A node difference ORCHGEN_BETTER_NODES allows: a node key the site left unset."""
    return key in ORCHGEN_BETTER_NODES.get("Features", "") and before in (None, "(null)", "") \
        if key in ("ActiveFeatures", "AvailableFeatures") else False


def _config_key(shown: str) -> str:
    return {"TaskPrologPath": "TaskProlog"}.get(shown, shown)


# (site, Debian suite, its Slurm): every site on the host's 22.05 but those NEWER names; the constructed edge
# config also on 26.05 (forky chroot), where orchgen writes topology.yaml and MpiDefault=pmix. Most public
# sites use keys 23.11 removed (select/cons_res, CryptoType), so they boot on 22.05 only.
# slurm-gcp v6 writes AuthType=auth/slurm and CredType=cred/slurm (Slurm 23.11+); DeepOps writes MpiDefault=pmix,
# whose plugin Debian 12's 22.05 cannot load ("mpi/pmix_v4: Plugin init() callback failed", fatal): both boot on
# 24.11 (trixie), which has the PMIx library.
NEWER = {"slurm-gcp": ("trixie", "24.11"), "deepops": ("trixie", "24.11")}
RUNS = [(site, *NEWER.get(site, ("bookworm", "22.05"))) for site in sorted(JOBS)] + [("import-edge", "forky", "26.05")]


@pytest.mark.parametrize("site, suite, version", RUNS)
def test_regenerated_site_is_the_original_plus_only_orchgen_better(site, suite, version, tmp_path):
    require_slurm(suite)
    original = _original(site, tmp_path / site)
    regenerated = _regenerated(original, tmp_path / "import", version)
    with SlurmCluster(_inlined(original, tmp_path / "booted"), suite=suite) as c:
        before = _snapshot(c, site)
    with SlurmCluster(regenerated, suite=suite) as c:
        after = _snapshot(c, site)
        assert not [p for p in c.problems() if "fatal" in p], c.problems()
    written = {r.kind for r in slurmconf.read(original / "slurm.conf").records if len(r.pairs) == 1}
    diff = _differences(before, after, written)
    assert diff == [], "\n".join(diff)
    # not vacuous: every node and partition of the site came up, and its own jobs are accepted
    assert len(before["nodes"]) == len(after["nodes"]) >= 1 and before["partitions"]
    if site in ACCEPTED:
        assert [j[1] for j in after["jobs"]] == [0] * len(JOBS[site]), after["jobs"]
