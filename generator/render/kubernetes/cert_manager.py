"""cert-manager: the release's values (Slinky's and Soperator's webhooks take certificates from it)."""
from __future__ import annotations

from typing import Any

from ...decide.plan import Plan


def values(plan: Plan) -> dict[str, Any]:
    # v1.21: crds.enabled (installCRDs is deprecated); crds.keep (the chart's default, spelt out)
    # puts `helm.sh/resource-policy: keep` on the CRDs, so an uninstall does not delete every
    # Certificate in the cluster.
    return {"crds": {"enabled": True, "keep": True}}
