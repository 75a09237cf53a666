"""Issue 39: docs/workload-yaml-reference.md is generated from the schema (`orchgen schema --markdown`, from
spec/models.py and schema_doc.py), so that it cannot drift: a field added, renamed, given another default or
another description fails this test until the file is generated again."""
from __future__ import annotations

import re

from .conftest import REPO, run_orchgen

DOC = REPO / "docs" / "workload-yaml-reference.md"


def test_the_committed_reference_is_what_the_schema_generates():
    fresh = run_orchgen("schema", "--markdown", check=True).stdout
    assert DOC.read_text() == fresh, ("docs/workload-yaml-reference.md is stale: run "
                                      "`orchgen schema --markdown > docs/workload-yaml-reference.md`")


def test_every_field_of_the_schema_has_a_row_with_type_default_and_description():
    import json

    schema = json.loads(run_orchgen("schema", check=True).stdout)
    text = DOC.read_text()
    sections = dict(re.findall(r"(?ms)^## (\w+)\n(.*?)(?=^## |\Z)", text))
    objects = {"Fleet": schema, **schema["$defs"]}
    assert set(sections) == set(objects)
    for name, obj in objects.items():
        rows = {m.group(1): m.group(0) for m in re.finditer(r"(?m)^\| `([^`]+)` \|.*\|$", sections[name])}
        assert set(rows) == set(obj["properties"]), name
        for field, row in rows.items():
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
            assert len(cells) == 5 and cells[1] and cells[2] and cells[4], (name, row)
    # an enum's values, a default and a required field, as a reader looks them up
    assert re.search(r"(?m)^\| `plane` \| string \| `auto` \| `auto` \\\| `slurm` \\\| `kubernetes` \|", text)
    assert re.search(r"(?m)^\| `workloads` \| list of \[Workload\]\(#workload\) \| required \|", text)


def test_schema_markdown_and_plan_are_one_or_the_other():
    proc = run_orchgen("schema", "--markdown", "--plan")
    assert proc.returncode == 2 and "--plan and --markdown" in proc.stderr
