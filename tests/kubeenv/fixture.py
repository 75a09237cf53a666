"""pytest fixtures for the loopback control plane. Import them into a test module:

    from tests.kubeenv.fixture import kube, kube_factory  # noqa: F401

`kube` is a started `Cluster` (etcd, apiserver, controller manager, scheduler, KWOK) for one test;
`kube_factory(**kwargs)` starts more (another admission configuration, no scheduler ...).
Both skip with the reason when the binaries are not built (tests/kubeenv/build.sh; scripts/test.sh
builds them), and fail instead under ORCHGEN_STRICT=1 (tests/_consumers.require).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Iterator

import pytest

from tests._consumers import require

from .cluster import Cluster, bin_dir, lws_binary, missing_binaries, volcano_bin_dir


def require_kubeenv() -> None:
    missing = missing_binaries()
    require(not missing, f"test control plane not built ({', '.join(missing)} missing in {bin_dir()}): "
                         "run tests/kubeenv/build.sh")
    require(shutil.which("openssl"), "openssl not installed (the control plane's certificates)")


def require_lws() -> None:
    path = lws_binary()
    require(os.access(path, os.X_OK), f"LeaderWorkerSet's controller not built ({path} missing): run "
                                      "tests/kubeenv/lws/build.sh")


def require_volcano() -> None:
    d = volcano_bin_dir()
    missing = [n for n in ("vc-scheduler", "vc-controller-manager", "vc-webhook-manager") if not os.access(d / n, os.X_OK)]
    require(not missing, f"Volcano not built ({', '.join(missing)} missing in {d}): run tests/kubeenv/volcano/build.sh")


@pytest.fixture
def kube_factory(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    require_kubeenv()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # the run's shared folder (cluster.SHARED): an xdist worker's base temporary folder is
        # <the run's>/<worker id>, so its parent is the same for every worker of this run only
        from . import cluster

        cluster.SHARED = tmp_path_factory.getbasetemp().parent / "kubeenv-shared"
    started: list[Cluster] = []

    def make(**kwargs) -> Cluster:
        if kwargs.get("lws"):
            require_lws()
        if kwargs.get("volcano"):
            require_volcano()
        c = Cluster(tmp_path / f"kube{len(started)}", **kwargs)
        started.append(c)
        return c.__enter__()

    try:
        yield make
    finally:
        for c in reversed(started):
            c.stop()


@pytest.fixture
def kube(kube_factory) -> Cluster:
    return kube_factory()
