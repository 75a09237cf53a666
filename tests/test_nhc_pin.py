"""Issue 39: the bring-up's NHC is pinned by content. bringup/fetch_nhc.sh fetches NHC 1.4.3 from
orchgen_nhc_url (ORCHGEN_NHC_URL for a mirror; file:// here, as a site's mirror may be) and installs
nothing unless each file the bring-up installs has tag 1.4.3's sha256 and helpers/ and scripts/ hold no
other file. Run with curl, tar and sha256sum for real, on archives laid out as GitHub serves the tag's."""
from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from .conftest import REPO, run_orchgen

FILES = ("nhc", "nhc-genconf", "nhc-wrapper", "helpers/node-mark-offline", "helpers/node-mark-online",
         "scripts/common.nhc", "scripts/lbnl_nv.nhc")


@pytest.fixture(scope="module")
def fetch(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "out"
    run_orchgen("plan", REPO / "examples/research-lab.yaml", "-o", out, "-q", check=True)
    script = out / "bringup" / "fetch_nhc.sh"
    site = (out / "bringup" / "site.yml").read_text()
    assert "fetch_nhc.sh" in site and "ORCHGEN_NHC_URL" in site  # the playbook runs it, with the mirror variable
    return script


def _archive(tree: Path, dest: Path) -> str:
    with tarfile.open(dest, "w:gz") as tar:
        tar.add(tree, arcname="nhc-1.4.3")  # one top folder, as GitHub's tag archive
    return dest.as_uri()


def _run(script: Path, url: str, dest: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(script), url, str(dest)], capture_output=True, text=True, timeout=60)


def _fake_tree(root: Path) -> Path:
    for name in FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"#!/bin/sh\n# not NHC: {name}\n")
    return root


def test_a_tree_that_is_not_nhc_1_4_3_is_refused_and_nothing_is_installed(fetch, tmp_path):
    url = _archive(_fake_tree(tmp_path / "tree"), tmp_path / "mirror.tar.gz")
    dest = tmp_path / "cache" / "nhc"
    proc = _run(fetch, url, dest)
    assert proc.returncode == 1 and not dest.exists(), proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"NHC: {url} is not NHC 1.4.3"), proc.stderr
    assert "nhc: FAILED" in lines[0] and "ORCHGEN_NHC_URL" in lines[0]


def test_an_unreachable_mirror_is_one_line(fetch, tmp_path):
    url = (tmp_path / "missing.tar.gz").as_uri()
    proc = _run(fetch, url, tmp_path / "nhc")
    assert proc.returncode == 1 and not (tmp_path / "nhc").exists()
    assert proc.stderr.startswith(f"NHC: cannot fetch {url}: ") and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.skipif(not os.environ.get("ORCHGEN_NHC_SOURCE"),
                    reason="ORCHGEN_NHC_SOURCE (a checkout of github.com/mej/nhc at tag 1.4.3) not set")
def test_nhc_1_4_3_passes_and_one_extra_script_fails_it(fetch, tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(os.environ["ORCHGEN_NHC_SOURCE"], tree, ignore=shutil.ignore_patterns(".git"))
    dest = tmp_path / "cache" / "nhc"
    proc = _run(fetch, _archive(tree, tmp_path / "good.tar.gz"), dest)
    assert proc.returncode == 0, proc.stderr
    assert (dest / "nhc").read_bytes() == (tree / "nhc").read_bytes() and (dest / "helpers/node-mark-offline").exists()
    (tree / "scripts" / "site.nhc").write_text("rm -rf /\n")
    proc = _run(fetch, _archive(tree, tmp_path / "extra.tar.gz"), tmp_path / "other")
    assert proc.returncode == 1 and "not in 1.4.3: scripts/site.nhc." in proc.stderr and not (tmp_path / "other").exists()
