"""Issue 33: a site's own Slurm package repository (options.slurm.repository), proven with the real apt of a bare
Debian 12 host and the playbook's own tasks, without another bring-up.

A throwaway OpenPGP key (gpg) signs a repository built here (dpkg-deb, dpkg-scanpackages, an InRelease that
`gpg --clearsign` writes), served over loopback HTTP (http.server). `orchgen plan` takes a slurm_version no OS
of the bring-up packages (25.11) because the repository provides it, and the README says so. One bare host
(tests/bringupharness: debootstrap root, sshd, nothing else) gets the repository from the bundle's site.yml run
by ansible-playbook with `--tags slurm_repo` (the tasks themselves, not a copy of them); then that host's apt says
the site's slurmd wins over Debian's 22.05 (the pin), installs it, and a second run changes nothing. The task's own
apt command refuses, exit 100 with apt's line, a repository signed by another key and one not signed at all
(apt 2.6 alone warns and exits 0, leaving the OS's Slurm in place). The same runs take the nccl-tests
tasks (`--tags nccl_tests`): on this host, with no CUDA or NCCL, they print NOT INSTALLED with what is missing
and build nothing (the CUDA path needs a GPU node: not proven here).

SchedMD's packaging (`packaging: schedmd`): the same repository also serves packages under SchedMD's names and
relations (slurm-smd, slurm-smd-slurmd, -slurmctld, -client; Conflicts with Debian's), built here from this machine's
Debian 12 Slurm so that the daemons really run; the same host, its stand-in slurmd purged, is brought up by the
bundle's up.sh as a one-host cluster from them, and a job runs. A repository added to a cluster that runs Debian's
packages is an upgrade in SchedMD's order: `plan --diff` and apply.py say so, and the plays' order is checked as
ansible-playbook lists it (render level: a real upgrade run would be a second four-host bring-up).
"""
from __future__ import annotations

import functools
import hashlib
import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import yaml

from tests._consumers import require
from tests.bringupharness.hosts import Hosts
from tests.bringupharness.run import Site, failure, recap
from tests.support import run_cli

FLEET = Path(__file__).parent / "data" / "bringup" / "fleet.yaml"
SUITE = "bookworm"
SITE_SLURM = "25.11.0-1orchgen"  # a release no OS of the bring-up packages (contract.BRINGUP_OS_SLURM)
VENV_BIN = Path(sys.executable).parent


def _gpg(home: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["gpg", "--homedir", str(home), "--batch", *args], check=True, capture_output=True, **kw)


def _key(home: Path, name: str) -> tuple[str, bytes]:
    """A throwaway signing key: its fingerprint and its armored public key."""
    home.mkdir(mode=0o700, parents=True)
    _gpg(home, "--passphrase", "", "--quick-gen-key", f"{name} <{name}@example.invalid>", "ed25519", "sign", "1d")
    cols = _gpg(home, "--with-colons", "--list-keys", text=True).stdout
    fpr = next(line.split(":")[9] for line in cols.splitlines() if line.startswith("fpr"))
    return fpr, _gpg(home, "--armor", "--export", fpr).stdout


def _repository(top: Path, debs: list[tuple[str, str]], signer: tuple[Path, str] | None) -> None:
    """An apt repository at `top` (dists/SUITE/main/binary-amd64, pool/) with these packages (name, version),
    its Release signed inline (InRelease) by `signer` (GNUPGHOME, fingerprint), or unsigned."""
    pool = top / "pool"
    pool.mkdir(parents=True, exist_ok=True)
    for pkg in sorted((top / "src").glob("*/DEBIAN/control")) if (top / "src").is_dir() else ():
        fields = dict(line.split(": ", 1) for line in pkg.read_text().splitlines() if ": " in line)
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "--build", str(pkg.parents[1]),
                        str(pool / f"{fields['Package']}_{fields['Version']}_{fields['Architecture']}.deb")],
                       check=True, capture_output=True)
    for name, version in debs:
        pkg = top / "src" / name
        (pkg / "DEBIAN").mkdir(parents=True)
        (pkg / "DEBIAN/control").write_text(f"Package: {name}\nVersion: {version}\nArchitecture: all\n"
                                            "Maintainer: orchgen tests <tests@example.invalid>\n"
                                            "Description: stand-in for the site's Slurm package\n")
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(pkg),
                        str(pool / f"{name}_{version}_all.deb")], check=True, capture_output=True)
    shutil.rmtree(top / "src", ignore_errors=True)
    dist = top / "dists" / SUITE
    (dist / "main/binary-amd64").mkdir(parents=True)
    packages = subprocess.run(["dpkg-scanpackages", "--multiversion", "pool"], cwd=top, check=True,
                              capture_output=True).stdout
    (dist / "main/binary-amd64/Packages").write_bytes(packages)
    release = [f"Origin: orchgen-test\nLabel: orchgen-test\nSuite: {SUITE}\nCodename: {SUITE}",
               "Date: " + time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime()),
               "Architectures: amd64 all\nComponents: main\nSHA256:",
               f" {hashlib.sha256(packages).hexdigest()} {len(packages)} main/binary-amd64/Packages"]
    (dist / "Release").write_text("\n".join(release) + "\n")
    if signer:
        _gpg(signer[0], "--yes", "--local-user", signer[1], "--clearsign", "-o", str(dist / "InRelease"),
             str(dist / "Release"))


# SchedMD's packaging (its debian/control, from slurm-23-11-0-1): slurm-smd holds libslurm and every plugin (it
# Conflicts with slurm-wlm-basic-plugins), slurm-smd-slurmd / -slurmctld / -client the daemons and commands, each
# Conflicts with Debian's package of the same role, and no maintainer script makes a slurm user. The test's are built
# under those names and relations from this machine's Debian 12 Slurm (the release the bookworm host runs), so its
# daemons really run; SMD_VERSION is 22.05 (SchedMD's own debian/ starts at 23.11: plan warns, asserted below).
SMD_VERSION = "22.05.8-1orchgen.smd"
SMD = {  # SchedMD's package: (Debian's package whose files it takes, Debian's packages it Conflicts with)
    "slurm-smd": ("slurm-wlm-basic-plugins", "slurm-wlm, slurm-wlm-basic-plugins"),
    "slurm-smd-slurmd": ("slurmd", "slurmd"),
    "slurm-smd-slurmctld": ("slurmctld", "slurmctld"),
    "slurm-smd-client": ("slurm-client", "slurm-client"),
}


def _smd_trees(top: Path) -> None:
    """top/src/<name>/: SMD's packages as dpkg-deb trees (files of Debian's installed package; no /etc, no docs)."""
    arch = subprocess.run(["dpkg", "--print-architecture"], check=True, capture_output=True, text=True).stdout.strip()
    for name, (debian, conflicts) in SMD.items():
        tree = top / "src" / name
        (tree / "DEBIAN").mkdir(parents=True)
        listed = subprocess.run(["dpkg", "-L", debian], check=True, capture_output=True, text=True).stdout.split("\n")
        for path in listed:
            src = Path(path)
            if not path.startswith("/") or path.startswith(("/etc/", "/usr/share/doc/", "/usr/share/man/")) \
                    or src.is_dir() or not (src.is_file() or src.is_symlink()):
                continue
            # Debian's daemons are update-alternatives of /usr/sbin/NAME-wlm; SchedMD's packages install /usr/sbin/NAME
            dest = tree / path.lstrip("/").removesuffix("-wlm" if path.startswith("/usr/sbin/") else "")
            dest.parent.mkdir(parents=True, exist_ok=True)
            if src.is_symlink():
                os.symlink(os.readlink(src), dest)
            else:
                shutil.copy2(src, dest)
        depends = subprocess.run(["dpkg-query", "-W", "-f=${Depends}", debian], check=True, capture_output=True,
                                 text=True).stdout.split(", ")
        deps = [d for d in depends if not d.startswith(("slurm-", "ucf", "adduser"))]
        deps += ["munge"] if name == "slurm-smd" else [f"slurm-smd (= {SMD_VERSION})"]
        (tree / "DEBIAN/control").write_text(
            f"Package: {name}\nVersion: {SMD_VERSION}\nArchitecture: {arch}\nDepends: {', '.join(deps)}\n"
            f"Conflicts: {conflicts}\nMaintainer: orchgen tests <tests@example.invalid>\n"
            f"Description: SchedMD's {name} stand-in, from Debian's {debian}\n")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def _plan(work: Path, key: str, name: str) -> Path:
    data = yaml.safe_load(FLEET.read_text())
    data["options"]["slurm_version"] = SITE_SLURM.split(".0-")[0]
    data["options"].setdefault("slurm", {})["repository"] = {"url": work.joinpath("url").read_text(),
                                                            "suite": SUITE, "key": key}
    src = work / f"{name}.yaml"
    src.write_text(yaml.safe_dump(data, sort_keys=False))
    out = work / name
    proc = run_cli(["plan", src, "-o", out], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    # no OS packages 25.11, yet plan does not warn: the repository provides it, the README says so
    assert "no OS of the bring-up packages" not in proc.stderr, proc.stderr
    return out


def _plan_schedmd(work: Path) -> tuple[Path, str]:
    """A one-host cluster on the test's host (gpu01: controller and node), Slurm from the site repository under
    SchedMD's names (packaging: schedmd); what plan says on stderr. Only what the bring-up of one CPU host needs:
    no accounting, NHC, pyxis, containment (Debian's pam_slurm_adopt is not on this machine to repack) or telemetry."""
    data = {"apiVersion": "orchgen/v1alpha1", "kind": "Fleet", "metadata": {"name": "smd-lab"},
            "fleet": {"bare_metal": True, "slurm": {"controllers": ["gpu01"]},
                      "fabric": {"kind": "ethernet", "leaves": [{"name": "leaf1", "nodes": "gpu01"}]},
                      "pools": [{"name": "cpu", "nodes": 1, "hostnames": "gpu01",
                                 "cpu": {"sockets": 1, "cores_per_socket": 4, "threads_per_core": 1},
                                 "memory_gib": 8, "reserved": {"cores": 1, "memory_gib": 1}}]},
            "workloads": [{"name": "train", "nodes": 1, "pool": "cpu", "plane": "slurm"}],
            "options": {"slurm_version": SMD_VERSION.split(".8-")[0],
                        "slurm": {"containment": False, "telemetry": False, "health_check": False,
                                  "containers": "none",
                                  "repository": {"url": work.joinpath("url").read_text(), "suite": SUITE,
                                                 "key": "site.asc", "packaging": "schedmd"}}}}
    src = work / "smd.yaml"
    src.write_text(yaml.safe_dump(data, sort_keys=False))
    proc = run_cli(["plan", src, "-o", work / "smd"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return work / "smd", proc.stderr


@pytest.fixture(scope="module")
def site_repo(tmp_path_factory):
    """Two keys, the site's repository (signed by the first) served on loopback, and its bundle."""
    for tool in ("gpg", "dpkg-deb", "dpkg-scanpackages"):
        require(shutil.which(tool), f"{tool} not installed")
    work = tmp_path_factory.mktemp("slurm-repo")
    fpr, pub = _key(work / "gnupg-site", "site")
    (work / "site.asc").write_bytes(pub)
    (work / "other.asc").write_bytes(_key(work / "gnupg-other", "other")[1])
    _smd_trees(work / "www")
    _repository(work / "www", [("slurmd", SITE_SLURM)], (work / "gnupg-site", fpr))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_Quiet, directory=str(work / "www")))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    (work / "url").write_text(f"http://127.0.0.1:{server.server_address[1]}/debian-slurm")
    # the repository under a path, as a mirror keeps it (the URL's path is part of URIs)
    (work / "www" / "debian-slurm").symlink_to(".")
    try:
        yield work
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def bundle(site_repo):
    return _plan(site_repo, "site.asc", "bundle")


def test_plan_renders_the_source_key_and_pin(site_repo, bundle):
    repo = bundle / "bringup/slurm-repo"
    assert (repo / "orchgen-slurm.asc").read_bytes() == (site_repo / "site.asc").read_bytes()
    url = (site_repo / "url").read_text()
    source = (repo / "orchgen-slurm.sources").read_text()
    assert f"URIs: {url}\nSuites: {SUITE}\nComponents: main\nSigned-By: /etc/apt/keyrings/orchgen-slurm.asc\n" in source
    assert 'Pin: origin "127.0.0.1"\nPin-Priority: 1001\n' in (repo / "orchgen-slurm.pref").read_text()
    readme = " ".join((bundle / "README.md").read_text().split())
    assert "the site repository must provide slurm 25.11" in readme
    assert "no OS of the bring-up packages" not in readme
    # nccl-tests: the build's command line as vars.yaml gives it to nccl_tests.yml is the README's step, and the
    # playbook with both new task sets parses (ansible-playbook --syntax-check)
    nccl = yaml.safe_load((bundle / "bringup/vars.yaml").read_text())["orchgen_nccl_tests"]
    assert nccl["make"] == ("make -C /usr/local/src/nccl-tests-2.19.6 -j4 MPI=1 MPI_HOME=/usr/lib/$(uname -m)-linux-gnu/"
                            "openmpi CUDA_HOME=/usr/local/cuda NCCL_HOME=/usr BUILDDIR=/opt/nccl-tests-2.19.6")
    assert nccl["nodes"] == ["gpu01", "gpu02"] and nccl["binary"] == "/opt/nccl-tests-2.19.6/all_reduce_perf"
    assert nccl["make"] in nccl["steps"] and f"```bash\n{chr(10).join(nccl['steps'])}\n```" in \
        (bundle / "README.md").read_text()
    assert "To skip it" in readme and """-e '{"orchgen_check_args": "--skip nccl"}'""" in readme
    # the public key in the bundle is no secret to `orchgen validate` (a private key block still is one)
    valid = run_cli(["validate", bundle], capture_output=True, text=True)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    from generator.validate.secrets_check import scan
    private = (site_repo / "site.asc").read_text().replace("PUBLIC KEY", "PRIVATE KEY")
    assert any("PEM block" in what for _, what in scan(private)) and any("blob" in w for _, w in scan(private))
    syntax = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", "inventory.yaml", "site.yml", "--syntax-check"],
                            cwd=bundle / "bringup", capture_output=True, text=True,
                            env={**os.environ, "ANSIBLE_CONFIG": str(bundle / "bringup/ansible.cfg")})
    assert syntax.returncode == 0, syntax.stdout + syntax.stderr


KEY_TEXT = "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nxx\n-----END PGP PUBLIC KEY BLOCK-----\n"
BAD = [  # (repository fields over a good one, what the one line says)
    ({"key": "../outside.asc"}, "must name a file inside the folder of workload.yaml"),
    ({"key": "secret.asc"}, "is a private (secret) key"),
    ({"key": "notakey.asc"}, "is not one ASCII-armored OpenPGP public key"),
    ({"key": "missing.asc"}, "cannot read"),
    ({"url": "https://user:pw@mirror.example/slurm"}, "credential"),
    # apt's own place for a repository's login, not the Kubernetes Secret a serving credential goes to
    ({"url": "https://user:pw@mirror.example/slurm"}, "/etc/apt/auth.conf.d/"),
    ({"url": "ftp://mirror.example/slurm"}, "http:// or https://"),
    ({"suite": "bookworm main"}, "an apt suite or component"),
]


def _bad_fleet(tmp_path: Path, change: dict) -> Path:
    inside = tmp_path / "site"
    inside.mkdir(exist_ok=True)
    (tmp_path / "outside.asc").write_text(KEY_TEXT)
    (inside / "good.asc").write_text(KEY_TEXT)
    (inside / "secret.asc").write_text(KEY_TEXT.replace("PUBLIC", "PRIVATE"))
    (inside / "notakey.asc").write_text("deb http://mirror.example/slurm bookworm main\n")
    data = yaml.safe_load(FLEET.read_text())
    data["options"]["slurm"] = {"repository": {"url": "https://mirror.example/slurm", "suite": SUITE,
                                               "key": "good.asc", **change}}
    src = inside / "workload.yaml"
    src.write_text(yaml.safe_dump(data, sort_keys=False))
    return src


def test_bad_repository_is_one_line_naming_file_line_field(tmp_path):
    """Each bad value: the loader's one error naming workload.yaml, its line and the field (in-process, cheap);
    then the CLI for two of them: exit 2, that one line on stderr, nothing written."""
    from generator.errors import OrchgenError
    from generator.spec.load import load

    for change, says in BAD:
        with pytest.raises(OrchgenError) as err:
            load(_bad_fleet(tmp_path, change))
        line = str(err.value)
        field = next(iter(change))
        assert "workload.yaml:" in line and f"options.slurm.repository.{field}" in line and says in line, line
        assert "xx" not in line and "pw@" not in line
    for change, says in (BAD[1], BAD[4]):
        proc = run_cli(["plan", _bad_fleet(tmp_path, change), "-o", tmp_path / "out"], capture_output=True, text=True)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and says in lines[0], proc.stderr
        assert not (tmp_path / "out").exists()


def test_a_plan_without_bare_metal_slurm_says_the_repository_is_unused():
    from tests.support import plan_of

    data = yaml.safe_load((Path(__file__).parents[1] / "examples" / "serving-platform.yaml").read_text())
    data.setdefault("options", {}).setdefault("slurm", {})["repository"] = {
        "url": "https://mirror.example/slurm", "suite": SUITE, "key": "k.asc"}
    plan = plan_of(data)
    assert plan.slurm_plane is None or plan.slurm_plane.host != "bare-metal"
    [w] = [w for w in plan.warnings if w.field == "options.slurm.repository"]
    assert "nothing installs from it" in w.message


@pytest.mark.slurm
@pytest.mark.chroot
def test_bare_host_gets_slurm_from_the_site_repository(site_repo, bundle, tmp_path, request):
    require(os.geteuid() == 0, "needs root (overlay mounts, namespaces)")
    require(shutil.which("debootstrap"), "debootstrap not installed (scripts/test.sh installs it)")
    require(shutil.which("ssh"), "openssh-client not installed")
    require((VENV_BIN / "ansible-playbook").exists(), "ansible-core not installed (pip install -e '.[test]')")
    control_dir = tempfile.mkdtemp(prefix="orchgen-cp-", dir="/tmp")
    request.addfinalizer(lambda: shutil.rmtree(control_dir, ignore_errors=True))
    env = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ['PATH']}", "ANSIBLE_NOCOLOR": "1", "HOME": str(tmp_path),
           "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"), "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
           # the repository's tasks read no facts: skip gathering them (the test's time, not the product's path)
           "ANSIBLE_GATHERING": "explicit",
           # ssh's ControlPath is a Unix socket (at most 107 bytes): under an xdist worker's tmp_path it is too long
           # ("too long for Unix domain socket", CI's popen-gwN); a short folder, as bringupharness.run.Site uses
           "ANSIBLE_SSH_CONTROL_PATH_DIR": control_dir}
    with Hosts(SUITE, tmp_path / "hosts", next_octet=230) as hosts:
        hosts.boot(hosts.add("gpu01"))
        # Python for Ansible's modules, as site.yml's first play installs it on a bare host (not tagged slurm_repo)
        hosts.ssh("gpu01", "apt-get install -y -qq --no-install-recommends python3 >/dev/null 2>&1 || "
                  "(apt-get update -qq && apt-get install -y -qq --no-install-recommends python3 >/dev/null)",
                  timeout=300)
        inv = hosts.inventory(tmp_path / "hosts.yaml")

        def repo_tasks(b: Path) -> subprocess.CompletedProcess:
            # what apply.py runs (bringup/apply.py main), with only the repository's tasks, on this one host
            return subprocess.run(["ansible-playbook", "-i", str(b / "bringup/inventory.yaml"), "-i", str(inv),
                                   str(b / "bringup/site.yml"), "--tags", "slurm_repo,nccl_tests", "--limit", "gpu01"],
                                  capture_output=True, text=True, timeout=300,
                                  env={**env, "ANSIBLE_CONFIG": str(b / "bringup/ansible.cfg")})

        first = repo_tasks(bundle)
        assert first.returncode == 0, failure(first)
        assert recap(first.stdout)["gpu01"]["changed"] >= 1
        # nccl-tests on a GPU node without CUDA or NCCL (as this one): NOT INSTALLED, naming what is missing, and
        # nothing built (Ansible's YAML output folds long lines: read it with whitespace collapsed)
        said = " ".join(first.stdout.split())
        assert ("NOT INSTALLED: nccl-tests 2.19.6 on gpu01: the bring-up builds it only where CUDA and NCCL are "
                "installed") in said, failure(first)
        assert "missing here: /usr/local/cuda/bin/nvcc, /usr/include/nccl.h, /usr/lib/x86_64-linux-gnu/libnccl.so" \
            in said, failure(first)
        assert re.search(r"TASK \[built \(its README's make line\)[^\]]*\] \**\s*skipping: \[gpu01\]", first.stdout), \
            failure(first)
        assert hosts.ssh("gpu01", "test ! -e /opt/nccl-tests-2.19.6", check=False).returncode == 0
        policy = hosts.ssh("gpu01", "apt-cache policy slurmd").stdout
        # the site's release is the candidate, pinned at 1001, over Debian's own 22.05 (still listed at 500)
        assert f"Candidate: {SITE_SLURM}" in policy and f"{SITE_SLURM} 1001" in policy, policy
        assert "22.05" in policy, policy
        hosts.ssh("gpu01", "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurmd "
                  ">/dev/null")
        assert hosts.ssh("gpu01", "dpkg-query -W -f='${Version}' slurmd").stdout == SITE_SLURM

        again = repo_tasks(bundle)
        assert again.returncode == 0 and recap(again.stdout)["gpu01"]["changed"] == 0, failure(again)

        # what the task runs (its argv), refusing: a key that did not sign the repository (NO_PUBKEY), then the
        # repository unsigned (no InRelease): apt 2.6 alone would warn and exit 0; with Error-Mode=any it exits 100
        update = ("apt-get update -q -o Dir::Etc::SourceList=/etc/apt/sources.list.d/orchgen-slurm.sources "
                  "-o Dir::Etc::SourceParts=- -o APT::Get::List-Cleanup=0 -o APT::Update::Error-Mode=any")
        site_key = "/etc/apt/keyrings/orchgen-slurm.asc"
        other = (site_repo / "other.asc").read_text()
        hosts.ssh("gpu01", f"cp {site_key} /root/site.asc && printf '%s' '{other}' > {site_key}")
        wrong = hosts.ssh("gpu01", update, check=False)
        assert wrong.returncode == 100 and "NO_PUBKEY" in wrong.stderr, wrong
        hosts.ssh("gpu01", f"cp /root/site.asc {site_key}")
        inrelease = site_repo / "www/dists" / SUITE / "InRelease"
        inrelease.rename(inrelease.with_suffix(".off"))
        try:
            unsigned = hosts.ssh("gpu01", update, check=False)
        finally:
            inrelease.with_suffix(".off").rename(inrelease)
        assert unsigned.returncode == 100 and re.search(r"is (not|no longer) signed", unsigned.stderr), unsigned

        # SchedMD's packaging (options.slurm.repository.packaging: schedmd) on the same host, the stand-in slurmd
        # above purged: the whole bring-up (up.sh) of a one-host cluster installs slurm-smd-* from the repository
        # (not Debian's slurmd, slurm-wlm-basic-plugins: the names vars.yaml gives), makes the slurm user SchedMD's
        # packages do not make, starts slurmctld and slurmd from them, and a job runs
        hosts.ssh("gpu01", "dpkg --purge slurmd >/dev/null")
        smd, said = _plan_schedmd(site_repo)
        assert "SchedMD's Debian packaging (slurm-smd-*) starts at Slurm 23.11" in " ".join(said.split()), said
        site = Site(hosts, tmp_path / "site", legacy=True)
        up = site.up(site.install(smd), "--skip-tags", "checks")
        assert up.returncode == 0, failure(up)
        have = hosts.ssh("gpu01", "dpkg-query -W -f='${db:Status-Abbrev}${Package} ${Version}\\n' 'slurm*' "
                         "| sed -n 's/^ii *//p'").stdout.split("\n")
        assert sorted(x for x in have if x) == sorted(f"{name} {SMD_VERSION}" for name in SMD), have
        assert hosts.ssh("gpu01", "id -un slurm").stdout.strip() == "slurm"
        job = hosts.ssh("gpu01", "srun -N1 -w gpu01 sh -c 'echo $SLURM_JOB_ID $(hostname)'", timeout=120).stdout.split()
        assert job[1:] == ["gpu01"] and job[0].isdigit(), job


def _fleet_with(tmp_path: Path, name: str, release: str, repository: dict | None) -> Path:
    """The bring-up fleet planned with `release` and, when given, the site repository (key: a public key file)."""
    data = yaml.safe_load(FLEET.read_text())
    data["options"]["slurm_version"] = release
    if repository:
        (tmp_path / "site.asc").write_text(KEY_TEXT)
        data["options"]["slurm"] = {"repository": {"url": "https://mirror.example/slurm", "suite": SUITE,
                                                   "key": "site.asc", **repository}}
    src = tmp_path / f"{name}.yaml"
    src.write_text(yaml.safe_dump(data, sort_keys=False))
    return src


def test_a_repository_added_after_debian_s_slurm_is_an_upgrade_in_schedmd_order(tmp_path):
    """Issue 33: a site brought up with Debian's 22.05, then adding SchedMD's packages of 23.11 and re-planning. The
    re-plan's impact (`plan --diff`, and the bundle's own apply.py against the old bundle) says: an upgrade of Slurm's
    packages, slurmdbd first, then slurmctld, then slurmd. The playbook makes it in that order: plays run one after
    another over every host of theirs (Ansible's linear strategy), and the plays of slurmdbd, slurmctld and slurmd
    (in this order) each begin with upgrade.yml for their role, while the play before them installs Slurm only on a
    host with none. Render level (the plays' order as ansible-playbook --list-tasks reads it): the real run of an
    upgrade would cost a second bring-up of four hosts (test_bringup_real's), which CI's budget has no room for."""
    old = tmp_path / "old"
    first = run_cli(["plan", _fleet_with(tmp_path, "debian", "22.05", None), "-o", old], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    # 24.11 in one step from 22.05 is refused: past the release's compatibility window (upgrades.html), with the step
    far = run_cli(["plan", _fleet_with(tmp_path, "far", "24.11", {"packaging": "schedmd"}), "-o", old, "--diff"],
                  capture_output=True, text=True)
    said = " ".join(far.stdout.split())
    assert "impossible" in said and "not from 22.05: upgrade to 23.11 first, then plan 24.11" in said, said
    new_src = _fleet_with(tmp_path, "smd", "23.11", {"packaging": "schedmd"})
    diff = run_cli(["plan", new_src, "-o", old, "--diff"], capture_output=True, text=True)
    said = " ".join(diff.stdout.split())
    assert diff.returncode == 1, diff.stdout + diff.stderr
    assert "slurm upgrade: (packages) slurm" in said, said
    assert ("upgrade: (packages) slurm: Slurm 22.05 (debian packages) -> Slurm 23.11 (schedmd packages) why: "
            "SchedMD's upgrade guide: slurmdbd first") in said, said
    assert "every slurmdbd host (stop, upgrade, start: it converts the database), then every slurmctld host, then " \
           "every slurmd host" in said, said
    new = tmp_path / "new"
    assert run_cli(["plan", new_src, "-o", new], capture_output=True, text=True).returncode == 0
    v = yaml.safe_load((new / "bringup/vars.yaml").read_text())
    assert v["orchgen_slurm_packaging"] == "schedmd"
    assert v["orchgen_slurm_packages"] == {"slurmctld": ["slurm-smd-slurmctld", "slurm-smd-client"],
                                           "slurmdbd": ["slurm-smd-slurmdbd"],
                                           "slurmd": ["slurm-smd-slurmd", "slurm-smd-client",
                                                      "slurm-smd-libpam-slurm-adopt"]}
    others = {p for names in v["orchgen_packages"].values() for p in names}
    assert not others & {"slurmd", "slurmctld", "slurmdbd", "slurm-client", "libpam-slurm-adopt"}, others
    # the bundle's own apply.py, against the old bundle (--old; --dry-run: nothing runs), says the same
    dry = subprocess.run([sys.executable, str(new / "bringup/apply.py"), "hosts.yaml", "--old", str(old), "--dry-run"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "apply: (packages): slurm: 'Slurm 22.05 (debian packages)' -> 'Slurm 23.11 (schedmd packages)': upgrade " \
           "(SchedMD's upgrade guide: slurmdbd first" in dry.stdout, dry.stdout
    # the order: ansible-playbook's own reading of the plays (--list-tasks), each play's hosts and its first tasks
    listed = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", "inventory.yaml", "site.yml", "--list-tasks"],
                            cwd=new / "bringup", capture_output=True, text=True,
                            env={**os.environ, "ANSIBLE_CONFIG": str(new / "bringup/ansible.cfg")})
    assert listed.returncode == 0, listed.stdout + listed.stderr
    plays = [(m.group(1), block) for m, block in
             ((re.match(r"\d+ \(([^)]*)\)", part), part) for part in listed.stdout.split("play #")[1:])]
    upgrading = [hosts for hosts, tasks in plays if "Slurm's packages at the plan's release" in tasks]
    assert upgrading == ["slurmdbd", "slurmctld", "slurmd"], [hosts for hosts, _ in plays]
    [fresh] = [tasks for hosts, tasks in plays if "Slurm's packages of this host's roles (a fresh host)" in tasks]
    assert plays.index(next(p for p in plays if p[1] == fresh)) < [h for h, _ in plays].index("slurmdbd")
    upgrade = (new / "bringup/upgrade.yml").read_text()
    assert "state: latest" in upgrade and "select('in', group_names)" in upgrade
