"""The CLI's other faces: the recommend table, the JSON Schema, help, and what `plan` imports."""
from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import yaml

from .conftest import all_examples


def test_recommend_table_names_every_workload_and_reason(orchgen, example):
    proc = orchgen("recommend", example("research-lab"), check=True)
    for name in ("pretrain-70b", "vision-sweeps", "model-api", "eval-batch"):
        assert name in proc.stdout
    assert "coupled-multinode-bare-metal" in proc.stdout
    assert "hybrid, partitioned" in proc.stdout


def test_schema_is_valid_and_accepts_every_example(orchgen):
    schema = json.loads(orchgen("schema", check=True).stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for path in all_examples():
        errors = list(validator.iter_errors(yaml.safe_load(path.read_text())))
        assert not errors, (path, errors[0].message)
    assert not validator.is_valid({"apiVersion": "orchgen/v1alpha1", "kind": "Fleet"})
    assert "nvlink_domain_nodes" in json.dumps(schema)


def test_usage_error_is_one_line_exit_2(orchgen):
    proc = orchgen("plan")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1


def test_plan_and_recommend_do_not_import_heavy_packages(example):
    code = (
        "import sys; from generator.cli import main; sys.argv=['orchgen','plan',%r,'-o',%r];\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy=[m for m in ('pulumi','pulumi_kubernetes','jsonschema','kubernetes_validate','celpy','lark','grpc') if m in sys.modules]\n"
        "print('HEAVY:' + ','.join(heavy))"
    )
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([sys.executable, "-c", code % (str(example("cloud-training")), tmp + "/o")],
                             capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "HEAVY:", out.stdout


def test_help_builds_no_models():
    """Every user and test spawns orchgen: its start-up (`--help`, click's parsing, a usage error) imports
    neither the pydantic models of workload.yaml nor Jinja2; a command imports what it uses when it runs."""
    code = ("import sys; from generator.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('LOADED:' + ','.join(m for m in ('pydantic', 'generator.spec.models', 'jinja2', 'yaml')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "LOADED:", out.stdout
