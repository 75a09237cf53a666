"""Input nobody reviewed (issue 40, the input half): a PR's workload.yaml, a site's Slurm files.

Secrets never land in a bundle or an error line; every input is bounded (Include graphs, line counts,
simulated jobs, echoed values, closed streams); and input cannot steer the files orchgen writes
(its own file names, Slurm syntax in a value, its own namespaces, a newline in a name)."""
from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from generator import spec
from generator.errors import OrchgenError
from generator.spec import slurmconf

from .conftest import EXAMPLES, REPO, run_orchgen
from .support import cli_env, orchgen_argv
from .test_bad_input import BASE
from .test_import_slurm import MINIMAL, _import, _one_line_refusal

SERVING = EXAMPLES / "serving-platform.yaml"


def _write(tmp_path: Path, doc: dict | str, name: str = "fleet.yaml") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
    return path


def _refused(tmp_path: Path, doc: dict | str, *words: str, command: str = "plan") -> str:
    """The CLI refuses `doc`: exit 2, one printable stderr line naming the file, nothing written."""
    path = _write(tmp_path, doc)
    out = tmp_path / "out"
    args = ("plan", path, "-o", out) if command == "plan" else (command, path)
    done = run_orchgen(*args)
    assert done.returncode == 2, (done.returncode, done.stderr[:500])
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"orchgen: {path}:"), done.stderr[:500]
    assert "Traceback" not in done.stderr and not out.exists()
    for word in words:
        assert word in done.stderr, done.stderr
    return done.stderr


def _base() -> dict:
    return yaml.safe_load(BASE)


def _serving() -> dict:
    return yaml.safe_load(SERVING.read_text())


# ------------------------------------------------------------------------------- 1. secrets never land

# One of each documented shape (generator/errors.py TOKEN_SHAPES), built at run time so that this file
# holds no token-shaped literal itself.
TOKENS = {
    "hugging face": "hf_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3f",
    "github": "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "gitlab": "glpat-" + "Xy7_Zq3-Wp9Lm2Nk5Rt8",
    "aws": "AKIA" + "IOSFODNN7EXAMPLQ",
}


@pytest.mark.parametrize("field, value, secret", [
    ("weights", "https://alice:s3cretpw@models.example.com/llama", "s3cretpw"),
    ("weights", "https://{tok}@huggingface.co/meta-llama/Llama-3.1-8B", "{tok}"),
    ("weights", "hf://meta-llama/Llama-3.1-8B?token={tok}", "{tok}"),
    ("image", "registry.example.com/{low}/vllm:v1", "{low}"),
])
@pytest.mark.parametrize("kind", sorted(TOKENS))
def test_a_secret_in_a_serving_field_is_refused_and_never_echoed(tmp_path, field, value, secret, kind):
    if "s3cretpw" in value and kind != "github":
        pytest.skip("the userinfo case needs no token kind")
    if field == "image" and kind == "aws":
        pytest.skip("an image reference is lower-case; an AWS key id is upper-case")
    tok = TOKENS[kind]
    value, secret = value.format(tok=tok, low=tok.lower()), secret.format(tok=tok, low=tok.lower())
    doc = _serving()
    doc["workloads"][0]["serving"][field] = value
    err = _refused(tmp_path, doc, f"workloads[0].serving.{field}", "Secret")
    assert secret not in err and secret.lower() not in err.lower()


def test_a_token_anywhere_in_the_file_is_refused_with_its_line(tmp_path):
    doc = _base()
    doc["workloads"][0]["name"] = "train"
    doc["fleet"]["pools"][0]["node_labels"] = {"team": TOKENS["github"][:40]}
    text = yaml.safe_dump(doc, sort_keys=False)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "team:" in t)
    err = _refused(tmp_path, text, f"fleet.yaml:{line}: fleet.pools[0].node_labels.team")
    assert TOKENS["github"][:20] not in err


def test_a_site_credential_key_in_workload_yaml_is_refused(tmp_path):
    doc = _base()
    doc["site"] = {"slurm_conf": {"keys": [{"key": "AccountingStoragePass", "value": "hunter2x",
                                            "reason": "the site's"}]}}
    err = _refused(tmp_path, doc, "site.slurm_conf.keys[0].key", "credential")
    assert "hunter2x" not in err


@pytest.mark.parametrize("line", ["JobCompLoc=http://elastic:hunter2x@es.example.com:9200/slurm",
                                  "JobCompLoc=https://es.example.com/slurm?token=hunter2x"])
def test_import_slurm_never_carries_a_password_in_a_url(tmp_path, line):
    done = _import(tmp_path, MINIMAL + "JobCompType=jobcomp/elasticsearch\n" + line + "\n")
    written = (tmp_path / "workload.yaml").read_text() if done.returncode == 0 else ""
    assert "hunter2x" not in done.stdout + done.stderr + written, (done.stdout, written)
    assert done.returncode in (0, 2) and "Traceback" not in done.stderr
    assert "refused" in done.stdout + done.stderr


def test_validate_flags_a_token_shaped_value_in_any_bundle_file(tmp_path):
    from generator.validate import secrets_check

    for kind, token in TOKENS.items():
        found = list(secrets_check.scan(f"image: example.com/x:1\nmodel: {token}\n"))
        assert [n for n, _ in found] == [2], (kind, found)
    found = list(secrets_check.scan("url: https://bob:pa55word@db.example.com/x\n"))
    assert [n for n, _ in found] == [1]
    assert not list(secrets_check.scan("repo: ssh://git@github.com/org/repo\nweights: hf://meta-llama/x\n"))


_PIECES = [*TOKENS.values(), "password: s3cretpw0rd", "StoragePass=hunter2hunter2", "-----BEGIN PRIVATE KEY-----",
           "https://bob:pa55word@db.example.com/x", "?token=abc123", "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fXy7Zq3Wp9Lm2Nk5",
           "token", "pa\u017f\u017fword: hunter2hunter2", "api\u212aey=abc", "gh", "p_", "xox", "b-", ":", "=", "# ", " ", "\t", "\r", "\x0c", "\x85", "\u2028", "\n", "\r\n", "x", "\"", "'", "@", "/"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=30))
def test_secrets_scan_finds_what_a_line_by_line_scan_finds(pieces):
    """scan searches the whole text once per pattern and checks only the lines a pattern matches
    (issue 41): the same findings as checking every line, whatever the line breaks."""
    from generator.validate import secrets_check

    text = "".join(pieces)
    every_line = [(n, what) for n, line in enumerate(text.splitlines(), 1)
                  for what in secrets_check.line_findings(line)]
    assert list(secrets_check.scan(text)) == every_line


# ----------------------------------------------------------------------------------- 2. bounded everything

def _diamond(folder: Path, levels: int) -> Path:
    folder.mkdir()
    for i in range(levels):
        (folder / f"f{i}.conf").write_text(f"Include f{i + 1}.conf\nInclude f{i + 1}.conf\n")
    (folder / f"f{levels}.conf").write_text("MaxJobCount=1000\n")
    main = folder / "slurm.conf"
    main.write_text(MINIMAL + "Include f0.conf\n")
    return main


def test_an_include_diamond_is_cut_quickly(tmp_path):
    main = _diamond(tmp_path / "site", 10)  # within the depth bound: 2 + 4 + ... + 1024 reads
    started = time.monotonic()
    config = slurmconf.read(main)
    assert time.monotonic() - started < 5
    assert [p.message for p in config.problems] == [
        f"Include f10.conf: more than {slurmconf.MAX_INCLUDED_FILES} files read through Include (a file included "
        "twice counts twice); not read"]


def test_an_include_chain_too_deep_is_refused(tmp_path):
    folder = tmp_path / "site"
    folder.mkdir()
    for i in range(40):
        (folder / f"f{i}.conf").write_text(f"Include f{i + 1}.conf\n")
    (folder / "f40.conf").write_text("MaxJobCount=1000\n")
    (folder / "slurm.conf").write_text(MINIMAL + "Include f0.conf\n")
    config = slurmconf.read(folder / "slurm.conf")
    assert any("deeper than" in p.message for p in config.problems), config.problems


def test_include_total_lines_are_capped(tmp_path):
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "big.conf").write_text("MaxJobCount=1000\n" * 100_000)
    (folder / "slurm.conf").write_text(MINIMAL + "".join("Include big.conf\n" for _ in range(4)))
    config = slurmconf.read(folder / "slurm.conf")
    assert any("lines in all" in p.message for p in config.problems), config.problems
    assert len(config.records) <= slurmconf.MAX_TOTAL_LINES


def test_import_of_an_include_diamond_is_refused_in_seconds(tmp_path):
    main = _diamond(tmp_path / "site", 20)
    started = time.monotonic()
    done = run_orchgen("import", "slurm", main, "-o", tmp_path / "workload.yaml")
    assert time.monotonic() - started < 20
    _one_line_refusal(done, tmp_path, "Include")


def test_twenty_thousand_node_lines_are_refused_fast(tmp_path):
    lines = "".join(f"NodeName=n{i:05d} CPUs=8 RealMemory=1000\n" for i in range(20_000))
    started = time.monotonic()
    done = _import(tmp_path, "ClusterName=lab\nSlurmctldHost=ctl\n" + lines + "PartitionName=a Nodes=ALL\n")
    took = time.monotonic() - started
    assert took < 15, took
    _one_line_refusal(done, tmp_path, "slurm.conf:259: NodeName: more than 256 node lines")


def test_simulating_more_jobs_than_the_limit_is_refused_with_the_limit(tmp_path):
    from generator.simulate import jobs

    doc = _base()
    doc["workloads"][0].update(jobs_per_day=10_000_000, runtime="00:10:00")
    err = _refused(tmp_path, doc, "jobs_per_day", f"{jobs.MAX_SIMULATED_JOBS:,}", command="simulate")
    assert "fleet.yaml:" in err


def test_a_huge_unknown_key_is_cut_in_the_error_line(tmp_path):
    doc = _base()
    doc["k" * 1_000_000] = 1
    started = time.monotonic()
    err = _refused(tmp_path, doc, "unknown key", "more)", command="recommend")
    assert len(err) < 400 and time.monotonic() - started < 10


def test_a_huge_value_is_cut_in_the_error_line(tmp_path):
    doc = _base()
    doc["fleet"]["pools"][0]["hostnames"] = "gpu[" + "9" * 200_000
    err = _refused(tmp_path, doc, command="recommend")
    assert len(err) < 600


def _example_run(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([*orchgen_argv(), *args], stderr=subprocess.PIPE, text=True,
                            env=cli_env(kw.pop("env", None)), **kw)


def test_closed_stdout_exits_2_with_one_line():
    done = subprocess.run([*orchgen_argv(), "recommend", str(EXAMPLES / "superpod.yaml")], env=cli_env(),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          preexec_fn=lambda: os.close(1))
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr == "orchgen: cannot write to standard output: it is closed\n", done.stderr


@pytest.mark.parametrize("command", [("recommend", str(EXAMPLES / "superpod.yaml")), ("schema",)])
def test_a_reader_that_stops_early_is_no_error(command):
    proc = _example_run(*command, stdout=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()
    assert proc.wait(timeout=60) in (0, 1, 2)
    err = proc.stderr.read()
    assert "Traceback" not in err and "internal error" not in err and "Exception ignored" not in err, err


def test_an_absolute_output_works_with_the_working_directory_deleted(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    out = tmp_path / "out"
    argv = " ".join(shlex.quote(a) for a in orchgen_argv())
    env = cli_env() if os.environ.get("ORCHGEN_BIN") else {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(f"cd {gone} && rmdir {gone} && {argv} plan "
                          f"{EXAMPLES / 'research-lab.yaml'} -o {out} -q", shell=True, capture_output=True, text=True,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    assert (out / "plan.json").is_file()


def test_a_huge_key_in_a_site_file_is_cut_in_every_line(tmp_path):
    done = _import(tmp_path, MINIMAL + "K" * 100_000 + "=1\n")
    err = _one_line_refusal(done, tmp_path, "more)")
    assert all(len(line) < 2_100 for line in err.splitlines())


# -------------------------------------------------------------------------- 3. generated files cannot be steered

@pytest.mark.parametrize("name", ["task-prolog.sh", "accounts.sh", "nhc.conf", "plugstack.conf"])
def test_site_files_cannot_replace_orchgen_files(tmp_path, name):
    from generator.render import render
    from generator.decide import make_plan

    plan = make_plan(spec.load(_write(tmp_path, BASE)), str(tmp_path / "fleet.yaml"))
    written = {Path(p).name for p in render(plan)}
    assert name in written, sorted(written)  # the name is one orchgen writes
    doc = _base()
    doc["site"] = {"files": {name: "echo pwned\n"}}
    _refused(tmp_path, doc, "site.files", name)


@pytest.mark.parametrize("value, written", [("a b", 'Key="a b"'), ("x MaxJobCount=1", 'Key="x MaxJobCount=1"')])
def test_a_blank_in_a_site_value_is_quoted_not_a_second_key(tmp_path, value, written):
    from generator.render import render
    from generator.decide import make_plan

    doc = _base()
    doc["site"] = {"slurm_conf": {"keys": [{"key": "SlurmctldParameters", "value": value, "reason": "site"}]}}
    plan = make_plan(spec.load(_write(tmp_path, doc)), str(tmp_path / "fleet.yaml"))
    conf = render(plan)["slurm/slurm.conf"]
    conf = conf if isinstance(conf, str) else conf.decode()
    line = next(t for t in conf.splitlines() if t.startswith("SlurmctldParameters"))
    record = slurmconf.parse(line)[0]
    assert [p.key for p in record.pairs] == ["SlurmctldParameters"] and record.get("SlurmctldParameters") == value
    assert written.replace("Key", "SlurmctldParameters") == line


@pytest.mark.parametrize("value", ['a "b" c', '"', "a\tb"])
def test_a_site_value_slurm_cannot_read_is_refused(tmp_path, value):
    doc = _base()
    doc["site"] = {"slurm_conf": {"keys": [{"key": "SlurmctldParameters", "value": value, "reason": "site"}]}}
    _refused(tmp_path, doc, "site.slurm_conf.keys[0].value")


@pytest.mark.parametrize("name", ["orchgen-gpu-health", "kueue-system", "monitoring", "kube-foo", "orchgen-x"])
def test_a_tenant_cannot_take_an_orchgen_namespace(tmp_path, name):
    from generator import catalog
    from generator.render.kubernetes import gpu_health

    assert catalog.reserved_namespace(gpu_health.NAMESPACE)
    doc = _base()
    doc["tenants"][0]["name"] = name
    doc["workloads"][0]["tenant"] = name
    _refused(tmp_path, doc, "tenants[0].name", "reserved")


@pytest.mark.parametrize("where, value", [("group", "devs\n"), ("group", "devs\n- system:masters"),
                                          ("taint", "gpu\n"), ("label", "team\n")])
def test_a_name_with_a_trailing_line_break_is_refused(tmp_path, where, value):
    doc = _base()
    if where == "group":
        doc["tenants"][0]["kubernetes_group"], field = value, "tenants[0].kubernetes_group"
    elif where == "taint":
        doc["fleet"]["pools"][0]["taints"] = [{"key": value, "effect": "NoSchedule"}]
        field = "fleet.pools[0].taints[0].key"
    else:
        doc["fleet"]["pools"][0]["node_labels"] = {"team": value}
        field = "fleet.pools[0].node_labels"
    with pytest.raises(OrchgenError) as exc:
        spec.load(_write(tmp_path, doc))
    assert exc.value.field == field, exc.value


def test_no_spec_regex_lets_a_trailing_newline_through():
    """Every `$`-anchored pattern in the models is used with fullmatch (where `$` alone also matches
    before a final newline)."""
    import importlib
    import pkgutil
    import re

    import generator.spec

    for info in pkgutil.iter_modules(generator.spec.__path__):
        module = importlib.import_module(f"generator.spec.{info.name}")
        for name, rx in vars(module).items():
            if isinstance(rx, re.Pattern) and rx.pattern.endswith("$"):
                source = Path(module.__file__).read_text()
                assert f"{name}.match(" not in source and f"{name}.search(" not in source, name
