"""`orchgen import slurm` keeps a site's accounting (issue 22), proved in a real slurmdbd on MariaDB:

the site (tests/data/sites/acct-lab: made for this test, see its SOURCE.md) loads its own accounting the
way Slurm's admins do, its QOS with `sacctmgr add/modify qos` as `sacctmgr show qos` lists them (qos.txt)
and then its `sacctmgr dump` with `sacctmgr load`, into one database; `plan(import(site))`'s accounts.sh
loads the regenerated accounting into a second database. What slurmdbd then holds is compared:
`sacctmgr show qos` (name, priority, preemption, flags, usage factor, limits) and `sacctmgr show assoc`
(the account tree, users, shares, QOS, default QOS, limits), both parsable. Both boot on the host's
Slurm 22.05 (SLAC's slurm.conf cannot: its AccountingStorageEnforce=...,limit,... is refused there,
and the DGX fixture has no accounts).

So a QOS limit or a share that the import (or accounts.sh) drops fails the equality, and the values of
the site's files are asserted to be in slurmdbd, so a comparison of two empty databases cannot pass.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.slurmharness import SlurmCluster, require_slurm
from tests.slurmharness import parse

pytestmark = pytest.mark.slurm

SITE = Path(__file__).parent / "data" / "sites" / "acct-lab"
QOS_FIELDS = "Name,Priority,Preempt,PreemptMode,Flags,UsageFactor,GrpTRES,GrpJobs,MaxTRES,MaxWall,MaxTRESPU," \
             "MaxJobsPU,MaxSubmitPU,MaxTRESPA"
ASSOC_FIELDS = "Cluster,Account,User,ParentName,Share,QOS,DefaultQOS,GrpTRES,MaxTRES,MaxJobs,MaxWall"
# `sacctmgr show qos` column -> the word `sacctmgr modify qos set` takes
SET_WORD = {"MaxTRESPU": "MaxTRESPerUser", "MaxJobsPU": "MaxJobsPerUser", "MaxSubmitPU": "MaxSubmitJobsPerUser"}
UNSET = {"", "cluster", "00:00:00"}


def _site_loads_its_own(c: SlurmCluster) -> None:
    """The site's way: its QOS (qos.txt, `sacctmgr -P show qos`), then `sacctmgr load` of its dump."""
    rows = parse.table((SITE / "qos.txt").read_text())
    for row in rows:
        if row["Name"] != "normal":  # slurmdbd makes `normal`
            c.sacctmgr("add", "qos", row["Name"])
    for row in rows:
        words = [f"{SET_WORD.get(k, k)}={v}" for k, v in row.items() if k != "Name" and v not in UNSET]
        c.sacctmgr("modify", "qos", "where", f"name={row['Name']}", "set", *words)
    c.sacctmgr("load", f"file={SITE / 'sacctmgr.dump'}", "clean")


def _regenerated(work: Path) -> Path:
    work.mkdir()
    orchgen = [sys.executable, "-m", "generator.cli"]
    done = subprocess.run([*orchgen, "import", "slurm", str(SITE / "slurm.conf"), "--sacctmgr-dump",
                           str(SITE / "sacctmgr.dump"), "--sacctmgr-qos", str(SITE / "qos.txt"),
                           "--slurm-version", "22.05", "-o", str(work / "workload.yaml")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert ", 0 refused," in done.stdout, done.stdout  # every QOS column and dump line of the site is modelled
    done = subprocess.run([*orchgen, "plan", str(work / "workload.yaml"), "-o", str(work / "out"), "-q"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return work / "out" / "slurm"


def _snapshot(c: SlurmCluster) -> dict:
    qos = {r["Name"]: r for r in parse.table(c.run("sacctmgr", "-P", "show", "qos", f"format={QOS_FIELDS}").stdout)}
    for row in qos.values():  # lists in the order slurmdbd keeps them
        row["Flags"] = ",".join(sorted(row["Flags"].split(",")))
    assoc = {}
    for r in parse.table(c.run("sacctmgr", "-P", "show", "assoc", f"format={ASSOC_FIELDS}").stdout):
        r["QOS"] = ",".join(sorted(r["QOS"].split(",")))
        assoc[(r["Account"], r["User"])] = r
    return {"qos": qos, "assoc": assoc}


def test_regenerated_accounting_equals_the_sites_own(tmp_path, slurm_db):
    require_slurm("bookworm", accounting=True)
    with SlurmCluster(SITE, database=slurm_db, workdir=tmp_path / "site") as c:
        _site_loads_its_own(c)
        site = _snapshot(c)
    bundle = _regenerated(tmp_path / "import")
    with SlurmCluster(bundle, database=slurm_db, workdir=tmp_path / "regen") as c:
        state = f"ORCHGEN_ACCOUNTS_STATE={c.work}/accounts.state"
        c.run("env", state, "sh", f"{c.work}/etc/accounts.sh")
        ours = _snapshot(c)

    # the site's values are there (so two empty databases cannot pass), then everything is the same
    assert site["assoc"][("nlp", "")]["Share"] == "30" and site["assoc"][("vision", "")]["Share"] == "10"
    assert {("nlp", "alice"), ("nlp", "bob"), ("vision", "carol")} <= set(site["assoc"])
    assert site["qos"]["long"]["MaxWall"] == "7-00:00:00" and site["qos"]["long"]["GrpTRES"] == "gres/gpu=4"
    assert site["qos"]["normal"]["MaxTRESPU"] == "gres/gpu=8" and site["qos"]["scavenger"]["UsageFactor"] == "0.000000"
    assert site["assoc"][("nlp", "")]["Def QOS"] == "normal"
    assert ours["qos"] == site["qos"]
    assert ours["assoc"] == site["assoc"]
