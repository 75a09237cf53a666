"""KServe's two releases (kserve-crd, kserve-resources v0.20.0): the values of a serving platform
without Knative or Istio (issue 21; render/kubernetes/serving.py writes the InferenceServices)."""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan


def crd_values(plan: Plan) -> dict[str, Any]:
    del plan
    return {}  # the chart's defaults: its CRDs, nothing else


def values(plan: Plan) -> dict[str, Any]:
    del plan
    return {"kserve": {"controller": {
        # Standard (KServe 0.20's name for RawDeployment): a Deployment and Service per predictor,
        # no Knative Serving or Istio to install (the chart's default is Knative)
        "deploymentMode": "Standard",
        # orchgen writes the Ingress or HTTPRoute each workload asks for (serving.expose); KServe's own
        # would default to ingressClassName istio
        "gateway": {"disableIngressCreation": True}}}}
