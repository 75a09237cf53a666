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
    # the line names the field that carries a credential instead: serving.secret, a Secret's name
    err = _refused(tmp_path, doc, f"workloads[0].serving.{field}", "Secret", "serving.secret")
    assert secret not in err and secret.lower() not in err.lower()


@pytest.mark.parametrize("field", ["secret", "image_pull_secret"])
@pytest.mark.parametrize("value", ["HF_TOKEN", "-hf", "x" * 254])
def test_a_serving_secret_that_is_no_secret_name_is_refused(tmp_path, field, value):
    """serving.secret / image_pull_secret are a Kubernetes Secret's name (a DNS subdomain), never a value."""
    doc = _serving()
    doc["workloads"][0]["serving"][field] = value
    text = yaml.safe_dump(doc, sort_keys=False, width=1000)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if t.strip().startswith(f"{field}:"))
    _refused(tmp_path, text, f"fleet.yaml:{line}: workloads[0].serving.{field}", "Secret's name")


def test_a_serving_secret_is_rendered_as_a_reference_only(tmp_path):
    """serving.secret becomes the servers' envFrom on every stack (KServe: also the storage initializer's
    ServiceAccount), image_pull_secret imagePullSecrets; the bundle holds no Secret and no value, its
    README the kubectl line that makes each, and `validate`'s secrets scan passes it."""
    doc = _serving()
    by_name = {w["name"]: w for w in doc["workloads"]}
    by_name["rerank"]["serving"]["image_pull_secret"] = "registry-pull"
    by_name["agent-pipeline"]["serving"]["secret"] = "hf-token"
    path = _write(tmp_path, doc)
    out = tmp_path / "out"
    run_orchgen("plan", path, "-o", out, check=True)

    def objs(name: str) -> list[dict]:
        return [o for o in yaml.safe_load_all((out / "kubernetes" / "workloads" / f"{name}.yaml").read_text()) if o]

    def containers(o: dict) -> list[dict]:
        found = []
        def walk(x):
            if isinstance(x, dict):
                if "containers" in x and isinstance(x["containers"], list):
                    found.extend(x["containers"])
                for v in x.values():
                    walk(v)
            elif isinstance(x, list):
                for v in x:
                    walk(v)
        walk(o)
        return found

    ref = [{"secretRef": {"name": "hf-token", "optional": False}}]
    # KServe (chat-api, hf://): the server's envFrom and the ServiceAccount the storage initializer uses
    isvc, sa = objs("chat-api")[0], objs("chat-api")[-1]  # the server first, its ServiceAccount last
    assert sa["kind"] == "ServiceAccount" and sa["secrets"] == [{"name": "hf-token"}]
    assert isvc["kind"] == "InferenceService"
    assert isvc["spec"]["predictor"]["serviceAccountName"] == sa["metadata"]["name"]
    assert sa["metadata"]["namespace"] == isvc["metadata"]["namespace"] == "chat"
    assert [c["envFrom"] for c in isvc["spec"]["predictor"]["containers"]] == [ref]
    # LeaderWorkerSet (llama-405b, s3://): leader and worker both read the bucket's keys
    lws = objs("llama-405b")[0]
    assert [c["envFrom"] for c in containers(lws)] == [[{"secretRef": {"name": "model-store", "optional": False}}]] * 2
    # RayService: head and workers (Ray Serve LLM's engines download where they run)
    ray = objs("agent-pipeline")[0]
    assert ray["kind"] == "RayService" and [c["envFrom"] for c in containers(ray)] == [ref, ref]
    # a Deployment with a private image: imagePullSecrets, and no envFrom without serving.secret
    dep = objs("rerank")[0]
    assert dep["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "registry-pull"}]
    assert all("envFrom" not in c for c in containers(dep))
    # no Secret object, no HF_TOKEN value anywhere; the README says how to make each Secret
    for f in out.rglob("*"):
        if f.suffix in (".yaml", ".yml"):
            assert all(o.get("kind") != "Secret" for o in yaml.safe_load_all(f.read_text()) if isinstance(o, dict)), f
    readme = (out / "README.md").read_text()
    assert 'kubectl create secret generic hf-token -n chat --from-literal=HF_TOKEN="$HF_TOKEN"' in readme
    assert "kubectl create secret generic model-store -n chat --from-literal=AWS_ACCESS_KEY_ID=" in readme
    assert "kubectl create secret docker-registry registry-pull -n search " in readme
    plan = __import__("json").loads((out / "plan.json").read_text())
    assert {w["name"]: w["serving"].get("secret_name") for w in plan["workloads"] if w.get("serving")} == {
        "chat-api": "hf-token", "rerank": None, "llama-405b": "model-store", "agent-pipeline": "hf-token"}
    done = run_orchgen("validate", out, "--no-fetch")
    assert done.returncode == 0 and "looks like" not in done.stdout + done.stderr, done.stdout + done.stderr


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
                                  "JobCompLoc=https://es.example.com/slurm?token=hunter2x",
                                  "JobCompLoc=https://elastic%3Ahunter2x@es.example.com/slurm",
                                  "AccountingStorageParameters=SSL_CA=/etc/ca.pem,password=hunter2x"])
def test_import_slurm_never_carries_a_password_in_a_url(tmp_path, line):
    done = _import(tmp_path, MINIMAL + "JobCompType=jobcomp/elasticsearch\n" + line + "\n")
    written = (tmp_path / "workload.yaml").read_text() if done.returncode == 0 else ""
    assert "hunter2x" not in done.stdout + done.stderr + written, (done.stdout, written)
    assert done.returncode in (0, 2) and "Traceback" not in done.stderr
    assert "refused" in done.stdout + done.stderr


@pytest.mark.parametrize("value", ["password=hunter2x", "SSL_CA=/etc/ca.pem,password=hunter2x", "x token=hunter2x"])
def test_a_password_assigned_in_a_site_value_is_refused(tmp_path, value):
    doc = _base()
    doc["site"] = {"slurm_conf": {"keys": [{"key": "AccountingStorageParameters", "value": value,
                                            "reason": "the site's"}]}}
    err = _refused(tmp_path, doc, "site.slurm_conf.keys[0].value", "credential")
    assert "hunter2x" not in err


def test_validate_flags_a_token_shaped_value_in_any_bundle_file(tmp_path):
    from generator.validate import secrets_check

    for kind, token in TOKENS.items():
        found = list(secrets_check.scan(f"image: example.com/x:1\nmodel: {token}\n"))
        assert [n for n, _ in found] == [2], (kind, found)
    found = list(secrets_check.scan("url: https://bob:pa55word@db.example.com/x\n"))
    assert [n for n, _ in found] == [1]
    assert not list(secrets_check.scan("repo: ssh://git@github.com/org/repo\nweights: hf://meta-llama/x\n"))
    # Slurm's credential keys (spec/site.py CREDENTIAL_KEYS) with a literal value, as a hand edit would add them
    for line in ("AccountingStoragePass=hunter2x", "JobCompPass=hunter2x", "StoragePass=hunter2x"):
        assert [n for n, _ in secrets_check.scan(f"# x\n{line}\n")] == [2], line
    assert not list(secrets_check.scan("#AccountingStoragePass=hunter2x\nAccountingStorageHost=db\n"))
    # serving.secret as plan.json carries it: a Secret's name, not a value
    assert not list(secrets_check.scan('        "secret_name": "hf-token",\n'))


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


def test_a_trace_of_more_jobs_than_the_limit_is_refused(tmp_path, monkeypatch):
    """A trace replays one job per row: 5 million rows (its row bound) were 5 million jobs, gigabytes; the
    bound of a drawn demand holds for a trace too."""
    from generator.simulate import jobs

    monkeypatch.setattr(jobs, "MAX_SIMULATED_JOBS", 3)
    trace = tmp_path / "trace.csv"
    trace.write_text("submit_time,gpus,nodes,duration\n" + "".join(f"{i},8,1,60\n" for i in range(5)))
    plan = __import__("generator.decide", fromlist=["make_plan"]).make_plan(spec.load(_write(tmp_path, BASE)),
                                                                             str(tmp_path / "fleet.yaml"))
    with pytest.raises(OrchgenError) as exc:
        jobs.from_trace(plan, trace)
    assert exc.value.line == 5 and "more than the 3 orchgen simulates at once" in exc.value.message
    assert len(jobs.from_trace(plan, _write(tmp_path, "submit_time,gpus,nodes,duration\n0,8,1,60\n", "t.csv"))) == 1


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


# ------------------------------------------------------------------- 4. a site's files and the signals (round 2)

LUA_SITE = MINIMAL.replace("GresTypes=gpu\n", "GresTypes=gpu\nJobSubmitPlugins=lua\nTopologyPlugin=topology/tree\n")
BESIDE = {  # a file import slurm reads beside slurm.conf when no flag names one, with content it would carry
    "gres.conf": "Name=gpu Type=h100 File=/dev/nvidia[0-7] # leakedvalue4711\n",
    "cgroup.conf": "ConstrainCores=yes # leakedvalue4711\n",
    "job_submit.lua": "-- leakedvalue4711\nfunction slurm_job_submit(d, p, u) return slurm.SUCCESS end\n",
    "topology.conf": "SwitchName=leakedvalue4711 Nodes=gpu[01-04]\n",
}


@pytest.mark.parametrize("name", sorted(BESIDE))
def test_import_does_not_read_a_site_file_linked_out_of_its_folder(tmp_path, name):
    """Its Include was confined (issue 22); gres.conf, cgroup.conf, job_submit.lua and the topology file
    beside slurm.conf were read through a link anywhere, and job_submit.lua copied whole into workload.yaml."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / name).write_text(BESIDE[name])
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / name).symlink_to(elsewhere / name)
    done = _import(tmp_path, LUA_SITE)
    err = _one_line_refusal(done, tmp_path, f"site/{name}: leads outside the folder of slurm.conf")
    assert len(err.splitlines()) == 1 and "leakedvalue4711" not in done.stdout + err
    # a link that stays inside the folder, or leads into an --input-root, is read as before
    done = _import(tmp_path, LUA_SITE, "--input-root", str(elsewhere))
    assert done.returncode == 0, done.stderr
    (tmp_path / "workload.yaml").unlink()
    if name == "job_submit.lua":
        (tmp_path / "site" / name).unlink()
        (tmp_path / "site" / "lua").mkdir()
        (tmp_path / "site" / "lua" / name).write_text(BESIDE[name])
        (tmp_path / "site" / name).symlink_to(Path("lua") / name)
        assert _import(tmp_path, LUA_SITE).returncode == 0


def test_import_does_not_write_the_topology_copy_through_a_link(tmp_path):
    """The topology file is copied beside workload.yaml: a dangling link there made orchgen create the file
    where the link leads (and then remove the link, a file orchgen did not write)."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "topology.conf").write_text("SwitchName=s1 Nodes=gpu[01-04]\n")
    out = tmp_path / "out"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "topology.conf").symlink_to(elsewhere / "planted")
    done = _import(tmp_path, LUA_SITE.replace("JobSubmitPlugins=lua\n", ""), out="out/workload.yaml")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert not any(elsewhere.iterdir()) and (out / "topology.conf").is_symlink()
    assert sorted(p.name for p in out.iterdir()) == ["topology.conf"]


def test_a_fleet_past_the_node_limit_is_refused_before_its_hostnames_are_expanded(tmp_path):
    """256 pools of 65,536 named nodes each: every name was expanded and checked (97 s, 1.5 GB) before the
    fleet's size was refused."""
    from generator.spec.models import MAX_FLEET_NODES, MAX_NODES_PER_POOL, MAX_POOLS

    doc = _base()
    pool = doc["fleet"]["pools"][0]
    doc["fleet"]["pools"] = [{**pool, "name": f"p{i}", "nodes": MAX_NODES_PER_POOL,
                              "hostnames": f"g{i}n[00001-{MAX_NODES_PER_POOL:05d}]"} for i in range(MAX_POOLS)]
    doc["fleet"]["fabric"]["nodes_per_leaf"] = 64
    doc["workloads"][0]["pool"] = "p0"
    started = time.monotonic()
    _refused(tmp_path, doc, f"fleet.pools: the fleet has {MAX_POOLS * MAX_NODES_PER_POOL} nodes; orchgen plans "
                            f"at most {MAX_FLEET_NODES}", command="recommend")
    assert time.monotonic() - started < 20


def _foreground() -> None:
    """In the child: the three signals at their defaults, as in a terminal's foreground (a CI runner's
    background job inherits SIGINT ignored, which orchgen keeps ignoring, as it should)."""
    import signal

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_ends_orchgen_with_one_line_and_exit_2(tmp_path, sig):
    """A CI runner's SIGTERM (or a closed terminal's SIGHUP) killed orchgen without a word (exit -15), and a
    Ctrl-C printed an empty line before its message (at start, a traceback). Here orchgen is surely running
    when the signal comes: `init` waits at its first question on a terminal. (A signal that lands after
    Python's input() has begun but before its read() blocks is seen only at the next one: CPython's race,
    not orchgen's; a Ctrl-C there is pressed again. The signal is sent again after 5 s for that reason.)"""
    import pty
    import signal

    primary, secondary = pty.openpty()
    out = tmp_path / "workload.yaml"
    try:
        proc = subprocess.Popen([*orchgen_argv(), "init", "-o", str(out)], stdin=secondary, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=cli_env(), preexec_fn=_foreground)
        os.close(secondary)
        assert b"Fleet name" in proc.stdout.read(len("Fleet name")), "init asked nothing"
        time.sleep(0.3)  # into its read of the answer
        proc.send_signal(getattr(signal, sig))
        try:
            _, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.send_signal(getattr(signal, sig))
            _, err = proc.communicate(timeout=60)
    finally:
        os.close(primary)
    assert proc.returncode == 2, (proc.returncode, err)
    assert err.decode() == f"orchgen: stopped by {sig}\n", err
    assert not out.exists()


def test_a_signal_during_a_plan_leaves_the_bundle_whole(tmp_path):
    """A bundle being replaced when SIGTERM comes is the old one or the new one, never half of either, and no
    staging folder is left (the cleanups run); the exit is 2 with one line, or 0 where the plan was done."""
    import signal

    out = tmp_path / "out"
    assert run_orchgen("plan", EXAMPLES / "superpod.yaml", "-o", out, "-q").returncode == 0
    before = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    for delay in (0.3, 0.6, 0.9):
        proc = _example_run("plan", str(EXAMPLES / "superpod.yaml"), "-o", str(out), "-q", stdout=subprocess.PIPE,
                            preexec_fn=_foreground)
        time.sleep(delay)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode in (0, 2), (proc.returncode, err)
        if proc.returncode == 2:
            assert err == "orchgen: stopped by SIGTERM\n", err
        assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out"], "a staging folder was left"


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_discover_reads_its_inventory_bounded(tmp_path, kind):
    """discover's HOSTS.yaml (a bundle's bringup/inventory.yaml, which a pull request may edit): a FIFO hung
    it, and a link to /dev/zero was read until memory ran out. Refused before a byte is read now."""
    import resource

    inventory = tmp_path / "inventory.yaml"
    if kind == "fifo":
        os.mkfifo(inventory)
    else:
        inventory.symlink_to("/dev/zero")

    def capped() -> None:  # a regression reads /dev/zero until memory runs out: 4 GiB here, not the machine's
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    done = subprocess.run([*orchgen_argv(), "discover", str(EXAMPLES / "research-lab.yaml"), str(inventory), "-o",
                           str(tmp_path / "facts.yaml")], capture_output=True, text=True, env=cli_env(),
                          timeout=60, preexec_fn=capped)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr == f"orchgen: {inventory}: is {'a FIFO (named pipe)' if kind == 'fifo' else 'a device'}, " \
                          "not a regular file\n", done.stderr
    assert not (tmp_path / "facts.yaml").exists()
