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
from pathlib import Path

import pytest

from tests.slurmharness import SlurmCluster, require_slurm
from tests.slurmharness import parse
from tests.support import orchgen_argv


SITE = Path(__file__).parent / "data" / "sites" / "acct-lab"
QOS_FIELDS = "Name,Priority,Preempt,PreemptMode,Flags,UsageFactor,GrpTRES,GrpJobs,MaxTRES,MaxWall,MaxTRESPU," \
             "MaxJobsPU,MaxSubmitPU,MaxTRESPA"
ASSOC_FIELDS = "Cluster,Account,User,ParentName,Share,QOS,DefaultQOS,GrpTRES,MaxTRES,MaxJobs,MaxWall"
# `sacctmgr show qos` column -> the word `sacctmgr modify qos set` takes
SET_WORD = {"MaxTRESPU": "MaxTRESPerUser", "MaxJobsPU": "MaxJobsPerUser", "MaxSubmitPU": "MaxSubmitJobsPerUser"}
UNSET = {"", "cluster", "00:00:00"}


# the site as published, and the same site where one account has its own QOS list and DefaultQOS
DUMPS = {"as-dumped": lambda text: text,
         "own-qos-list": lambda text: text.replace("DefaultQOS='normal':Fairshare=10:QOS='long,normal,scavenger'",
                                                   "DefaultQOS='long':Fairshare=10:QOS='long,normal'")}


def _site_loads_its_own(c: SlurmCluster, dump: Path) -> None:
    """The site's way: its QOS (qos.txt, `sacctmgr -P show qos`), then `sacctmgr load` of its dump."""
    rows = parse.table((SITE / "qos.txt").read_text())
    for row in rows:
        if row["Name"] != "normal":  # slurmdbd makes `normal`
            c.sacctmgr("add", "qos", row["Name"])
    for row in rows:
        words = [f"{SET_WORD.get(k, k)}={v}" for k, v in row.items() if k != "Name" and v not in UNSET]
        c.sacctmgr("modify", "qos", "where", f"name={row['Name']}", "set", *words)
    c.sacctmgr("load", f"file={dump}", "clean")


def _regenerated(work: Path, dump: Path) -> Path:
    work.mkdir()
    orchgen = orchgen_argv()
    done = subprocess.run([*orchgen, "import", "slurm", str(SITE / "slurm.conf"), "--sacctmgr-dump",
                           str(dump), "--sacctmgr-qos", str(SITE / "qos.txt"),
                           "--slurm-version", "22.05", "-o", str(work / "workload.yaml")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert ", 0 refused," in done.stdout, done.stdout  # every QOS column and dump line of the site is modelled
    done = subprocess.run([*orchgen, "plan", str(work / "workload.yaml"), "-o", str(work / "out"), "-q"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # and `validate` knows every line accounts.sh now writes (a tenant's own QOS list included)
    done = subprocess.run([*orchgen, "validate", str(work / "out"), "--no-fetch"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
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


@pytest.mark.slurm
@pytest.mark.parametrize("variant", sorted(DUMPS))
def test_regenerated_accounting_equals_the_sites_own(tmp_path, slurm_db, variant):
    require_slurm("bookworm", accounting=True)
    dump = tmp_path / "sacctmgr.dump"
    dump.write_text(DUMPS[variant]((SITE / "sacctmgr.dump").read_text()))
    with SlurmCluster(SITE, database=slurm_db, workdir=tmp_path / "site") as c:
        _site_loads_its_own(c, dump)
        site = _snapshot(c)
    bundle = _regenerated(tmp_path / "import", dump)
    with SlurmCluster(bundle, database=slurm_db, workdir=tmp_path / "regen") as c:
        state = f"ORCHGEN_ACCOUNTS_STATE={c.work}/accounts.state"
        c.run("env", state, "sh", f"{c.work}/etc/accounts.sh")
        ours = _snapshot(c)

    # the site's values are there (so two empty databases cannot pass), then everything is the same
    assert site["assoc"][("nlp", "")]["Share"] == "30" and site["assoc"][("vision", "")]["Share"] == "10"
    assert {("nlp", "alice"), ("nlp", "bob"), ("vision", "carol")} <= set(site["assoc"])
    assert site["qos"]["long"]["MaxWall"] == "7-00:00:00" and site["qos"]["long"]["GrpTRES"] == "gres/gpu=4"
    assert site["qos"]["normal"]["MaxTRESPU"] == "gres/gpu=8" and site["qos"]["scavenger"]["UsageFactor"] == "0.000000"
    assert site["assoc"][("nlp", "")]["Def QOS"] == "normal" and site["assoc"][("nlp", "")]["GrpTRES"] == "gres/gpu=8"
    if variant == "own-qos-list":
        assert site["assoc"][("vision", "")]["QOS"] == "long,normal" and site["assoc"][("vision", "")]["Def QOS"] == "long"
    assert ours["qos"] == site["qos"]
    assert ours["assoc"] == site["assoc"]


def _import(tmp_path: Path, dump: str, qos: str) -> subprocess.CompletedProcess:
    (tmp_path / "sacctmgr.dump").write_text(dump)
    (tmp_path / "qos.txt").write_text(qos)
    return subprocess.run([*orchgen_argv(), "import", "slurm", str(SITE / "slurm.conf"),
                           "--sacctmgr-dump", str(tmp_path / "sacctmgr.dump"), "--sacctmgr-qos", str(tmp_path / "qos.txt"),
                           "-o", str(tmp_path / "workload.yaml")], capture_output=True, text=True)


def test_what_the_model_cannot_keep_is_refused_with_its_line(tmp_path):
    """An account limit other than a GPU cap, a user's own share, an account QOS outside the site's set or a
    default QOS it may not use, a QOS column orchgen does not model: each a `refused` line, never silent."""
    dump = (SITE / "sacctmgr.dump").read_text()
    dump = dump.replace("GrpTRES=gres/gpu=8:", "GrpTRES=gres/gpu=8:MaxJobs=5:")
    dump = dump.replace("User - 'alice':DefaultAccount='nlp':Fairshare=1", "User - 'alice':DefaultAccount='nlp':Fairshare=4")
    dump = dump.replace("DefaultQOS='normal':Fairshare=10:QOS='long,normal,scavenger'",
                        "DefaultQOS='scavenger':Fairshare=10:QOS='long,normal'")
    dump = dump.replace("MaxJobs=5:QOS='long,normal,scavenger'", "MaxJobs=5:QOS='normal,urgent'")
    rows = [line.split("|") for line in (SITE / "qos.txt").read_text().splitlines()]
    rows[2][rows[0].index("GrpSubmit")] = "9"  # QOS long, line 3
    done = _import(tmp_path, dump, "".join("|".join(row) + "\n" for row in rows))
    assert done.returncode == 0, done.stderr
    refused = [ln for ln in done.stdout.splitlines() if ln.startswith("refused")]
    number = {ln.split("'")[1]: i for i, ln in enumerate(dump.splitlines(), 1) if ln.startswith(("Account", "User"))}
    where = tmp_path / "sacctmgr.dump"
    assert f"refused   {where}:{number['nlp']}: account nlp MaxJobs=5: not modelled by orchgen" in refused
    assert any(f"{where}:{number['alice']}: user alice of nlp Fairshare=4" in r for r in refused)
    assert any("account nlp QOS=normal,urgent: urgent not in the QOS set (long,normal,scavenger" in r for r in refused)
    assert any("account vision DefaultQOS=scavenger: not one of its QOS (long,normal)" in r for r in refused)
    assert any(f"{tmp_path / 'qos.txt'}:3: QOS long GrpSubmit=9: not modelled by orchgen" in r for r in refused), refused
    assert len(refused) == 5, refused


def test_a_file_that_is_not_sacctmgr_show_qos_is_refused(tmp_path):
    done = _import(tmp_path, (SITE / "sacctmgr.dump").read_text(), "Cluster - 'x'\n")
    assert done.returncode == 2 and not (tmp_path / "workload.yaml").exists()
    assert f"{tmp_path / 'qos.txt'}:1" in done.stderr and "sacctmgr -P show qos" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_typed_gpu_cap_is_read_whole_and_refused(tmp_path):
    """sacctmgr dumps a TRES limit unquoted, colon of a typed GRES included (`gres/gpu:a100=4`): it is read as
    one GrpTRES value, refused whole (orchgen's cap counts every GPU type), and the fields after it are still
    read (the account's QOS list stays modelled)."""
    dump = (SITE / "sacctmgr.dump").read_text().replace("GrpTRES=gres/gpu=8:", "GrpTRES=cpu=64,gres/gpu:a100=4:")
    done = _import(tmp_path, dump, (SITE / "qos.txt").read_text())
    assert done.returncode == 0, done.stderr
    refused = [ln for ln in done.stdout.splitlines() if ln.startswith("refused")]
    assert len(refused) == 1 and "account nlp GrpTRES=cpu=64,gres/gpu:a100=4: not modelled by orchgen" in refused[0], \
        refused
    assert "max_gpus" not in (tmp_path / "workload.yaml").read_text().split("name: nlp", 1)[1].split("- name:", 1)[0]


@pytest.mark.parametrize("tenant, field", [
    ("  slurm_qos: [normal, urgent]\n", "tenants[0].slurm_qos[1]"),
    ("  slurm_qos: [long, normal]\n  slurm_default_qos: scavenger\n", "tenants[0].slurm_default_qos"),
])
def test_a_tenant_qos_outside_the_set_is_one_input_error(tmp_path, tenant, field):
    """An account QOS that slurmdbd does not have, or a default the account may not use (sacctmgr refuses
    both): one stderr line naming the field, exit 2, nothing written."""
    imported = tmp_path / "w"
    imported.mkdir()
    done = _import(imported, (SITE / "sacctmgr.dump").read_text(), (SITE / "qos.txt").read_text())
    assert done.returncode == 0, done.stderr
    text = (imported / "workload.yaml").read_text().replace("  name: nlp\n", "  name: nlp\n" + tenant, 1)
    (tmp_path / "workload.yaml").write_text(text)
    done = subprocess.run([*orchgen_argv(), "plan", str(tmp_path / "workload.yaml"), "-o",
                           str(tmp_path / "out")], capture_output=True, text=True)
    assert done.returncode == 2 and not (tmp_path / "out").exists(), done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and field in lines[0] and "Traceback" not in done.stderr, done.stderr
