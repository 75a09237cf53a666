"""No secret is ever written into a bundle: every example bundle, in every GitOps mode, is grepped for
key material, and the secrets a deployment needs are referenced instead (a README step, a Secret name).

The patterns here are the test's own (not generator.validate.secrets_check's), so a bug in the
validator's detector cannot hide a leak from this test; a last test checks the validator agrees.
"""
from __future__ import annotations

import base64
import binascii
import re
from functools import cache

import pytest
import yaml

from generator.decide import make_plan
from generator.render import render
from generator.spec import load
from tests.conftest import all_examples

GITOPS = ("none", "kustomize", "argocd", "flux")

PEM = re.compile(rb"-----BEGIN")
# an access key id, or aws_secret_access_key given a literal (its name alone, or `=$VAR`, is a README's step)
AWS = re.compile(rb"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b|aws_secret_access_key[\"']?\s*[:=][ \t]*[\"']?(?![$<\"'\s])\S",
                 re.I)
# key: value / Key=value where the key names a secret; the value must not be a literal.
ASSIGN = re.compile(rb"(?i)(?:^|[\s\"'{,])(password|passwd|storagepass|token|secret|jwt_?key|munge_?key)"
                    rb"[\"']?\s*[:=][ \t]*([^\s,}]*)")
# A reference, a placeholder, or nothing: fine. Anything else after `password:` is a literal.
REFERENCE = re.compile(rb"^(|[\"']{2}|null|~|\|-?|<[^>]*>\S*|\$\{?[A-Za-z_]+\}?\S*|REPLACE\S*)$")
BLOB = re.compile(rb"(?<![A-Za-z0-9+/=_.-])[A-Za-z0-9+/]{43,}={0,2}(?![A-Za-z0-9+/=_.-])")


@cache
def bundle_of(example: str, gitops: str) -> dict[str, bytes]:
    path = next(p for p in all_examples() if p.stem == example)
    fleet = load(path)
    fleet = fleet.model_copy(update={"options": fleet.options.model_copy(update={"gitops": gitops})})
    return render(make_plan(fleet, path.name))


CASES = [(p.stem, g) for p in all_examples() for g in GITOPS]


def _random_blob(blob: bytes) -> bool:
    """>= 32 bytes of base64 that mixes cases and digits: what `mungekey`/`openssl rand -base64 32` print."""
    text = blob.decode()
    if not (re.search("[A-Z]", text) and re.search("[a-z]", text) and re.search("[0-9]", text)):
        return False
    try:
        return len(base64.b64decode(text + "=" * (-len(text) % 4))) >= 32
    except (binascii.Error, ValueError):
        return False


def leaks(files: dict[str, bytes]) -> list[str]:
    found = []
    for path, data in files.items():
        for number, line in enumerate(data.splitlines(), 1):
            where = f"{path}:{number}: "
            if PEM.search(line):
                found.append(where + "PEM block")
            if AWS.search(line):
                found.append(where + "AWS key")
            for key, value in ASSIGN.findall(line):
                if not REFERENCE.match(value) and not line.lstrip().startswith((b"#", b"//")):
                    found.append(where + f"literal {key.decode()}={value.decode()!r}")
            found += [where + "key-like base64 blob" for blob in BLOB.findall(line) if _random_blob(blob)]
    return found


@pytest.mark.parametrize("example,gitops", CASES)
def test_no_key_material_in_any_file(example, gitops):
    files = bundle_of(example, gitops)
    assert files
    assert not leaks(files), "\n".join(leaks(files))


def test_the_detector_finds_what_it_should():
    pem = b"-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\n"
    munge = base64.b64encode(bytes(range(7, 7 + 48)) + b"Zz9")  # 51 random-ish bytes
    samples = {
        "pem": pem, "aws": b"id: AKIAABCDEFGHIJKLMNOP\n", "munge": b"key: " + munge + b"\n",
        "dbpass": b"StoragePass=hunter2\n", "yaml": b"  password: s3cret\n", "token": b'{"token": "abc123"}\n',
        "aws_secret": b"aws_secret_access_key = wJalrXUtnFEMI\n",
    }
    for name, data in samples.items():
        assert leaks({name: data}), name
    fine = [b"  passwordKeyRef:\n    key: password\n    name: slurm-mariadb\n",
            b"kubectl create secret generic x --from-literal=password=<password>\n",
            b"# munge key: /etc/munge/munge.key; orchgen never writes it\n",
            b"image: nvcr.io/x@sha256:" + b"ab" * 32 + b"\n", b"token: ${TOKEN}\n", b'password: ""\n',
            b'kubectl create secret generic s -n t --from-literal=AWS_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY"\n']
    for data in fine:
        assert not leaks({"f": data}), data


def test_secrets_are_referenced_where_a_deployment_needs_them():
    """Slurm needs a munge key (and, with slurmdbd, a database password): the README says how to make
    them, and Slurm-on-Kubernetes values name the Secret that holds the password."""
    for example, gitops in CASES:
        if gitops != "none":
            continue
        files = bundle_of(example, gitops)
        readme = files["README.md"].decode()
        conf = files.get("slurm/slurm.conf", b"").decode()
        if conf:
            assert "munge.key" in readme and "mungekey" in readme, example
        if "accounting_storage/slurmdbd" in conf:
            assert "StoragePass" in readme and "slurmdbd.conf" in readme, example
        for path, data in files.items():
            if not path.startswith("kubernetes/helm/") or path.endswith("releases.yaml"):
                continue
            refs = [v for k, v in _walk(yaml.safe_load(data)) if re.search(r"(?i)password|secret", k)]
            for value in refs:  # a password setting is a reference to a Secret, never a string
                assert isinstance(value, dict) and {"name", "key"} <= set(value), (example, path, value)
                assert value["name"] in readme, f"{example}: README does not say how to create {value['name']}"


def _walk(data, prefix=""):
    if isinstance(data, dict):
        for k, v in data.items():
            yield str(k), v
            yield from _walk(v, f"{prefix}.{k}")
    elif isinstance(data, list):
        for v in data:
            yield from _walk(v, prefix)


def test_validate_reports_key_material(tmp_path):
    from generator import bundle
    from generator.validate.bundle_checks import validate_bundle

    files = dict(bundle_of("research-lab", "none"))
    files["slurm/slurm.conf"] += b"StoragePass=hunter2hunter2\n"
    files["kubernetes/helm/kueue.values.yaml"] += b"extraKey: |\n  -----BEGIN PRIVATE KEY-----\n"
    bundle.write(files, tmp_path / "b")
    messages = [str(f) for f in validate_bundle(tmp_path / "b").errors]
    assert any(m.startswith("slurm/slurm.conf:") and "literal StoragePass" in m for m in messages), messages
    assert any(m.startswith("kubernetes/helm/kueue.values.yaml:") and "PEM block" in m for m in messages), messages
