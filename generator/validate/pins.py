"""Helm's grammar of a release's chart name and version, apart from the chart fetcher (generator.validate.charts)
so that the checks of releases.yaml do not import urllib, http.client and ssl (~0.03 s a `validate`; issue 41)."""
from __future__ import annotations

import re

from ..spec.inputs import CHART_VERSION

# Helm's chart names (helm.sh/docs/chart_best_practices/conventions: lower case letters and numbers,
# words separated by dashes; `helm create` refuses a path) and the chart versions `plan` writes
# (spec/inputs.CHART_VERSION: SemVer 2, a leading `v`, MAJOR.MINOR as Helm reads it). Both are
# checked before a name or version is used in a path or URL: neither can hold `/` or be `..`.
CHART_NAME = re.compile(r"[a-z0-9]+(?:[-_.][a-z0-9]+)*")
MAX_NAME = 128
SEMVER = CHART_VERSION


def pin_problem(chart: object, version: object) -> tuple[str, str] | None:
    """(field, why) when a release's chart name or version is not Helm's grammar; None when both are."""
    if not isinstance(chart, str) or len(chart) > MAX_NAME or not CHART_NAME.fullmatch(chart):
        return "chart", ("not a Helm chart name (lower case letters, digits and single dashes, dots or "
                         f"underscores between them, at most {MAX_NAME} characters)")
    if not isinstance(version, str) or len(version) > MAX_NAME or not SEMVER.fullmatch(version):
        return "version", "not a SemVer chart version (such as 1.2.3 or v1.2.3-rc.1)"
    return None
