"""Kubernetes' CEL extension functions (generator.validate.cel): `split` and `substring` (cel-go's
ext.Strings) and `isIP` (Kubernetes' IP library), which Gateway API's CRD rules call. Every rule of
the Gateway API CRDs in ../shared/charts/_extra-crds compiles and evaluates, and the rules that use
the extensions accept and refuse what the API server does."""
from __future__ import annotations

import copy

import pytest

from generator.validate.cel import CelSchema
from generator.validate.crds import CRDRegistry
from tests._consumers import charts_dir
from tests.test_cel import _sample


@pytest.fixture(scope="module")
def gateway_api() -> CRDRegistry:
    return CRDRegistry.from_dir(charts_dir() / "_extra-crds" / "gateway-api")


def test_every_gateway_api_rule_compiles_and_evaluates(gateway_api):
    total = uses = 0
    for crd in gateway_api:
        rules = crd.cel.rules()
        for rule in rules:
            assert rule.error is None, f"{crd.api_version} {crd.kind} {rule.location}: {rule.error}"
            uses += any(f in rule.rule for f in ("split(", "substring(", "isIP("))
        total += len(rules)
        obj = {**_sample(crd.openapi_schema), "apiVersion": crd.api_version, "kind": crd.kind,
               "metadata": {"name": "route"}}
        outcome = crd.cel.check_create(obj)
        errors = [str(v) for v in outcome.violations if "evaluating rule" in v.message]
        assert not errors, (crd.kind, errors)
    assert total > 100 and uses >= 4, (total, uses)


def _schema(rule: str) -> CelSchema:
    return CelSchema({"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"v": {"type": "string"}, "l": {"type": "array", "items": {"type": "string"}}},
        "x-kubernetes-validations": [{"rule": rule, "message": "no"}]}}})


@pytest.mark.parametrize("rule, spec, ok", [
    ('self.v.split("/").size() == 2', {"v": "a/b"}, True),
    ('self.v.split("/").size() == 2', {"v": "a/b/c"}, False),
    ('self.v.split("/", 2) == ["a", "b/c"]', {"v": "a/b/c"}, True),
    ('self.v.split("/", 0).size() == 0', {"v": "a/b"}, True),
    ('self.v.substring(2) == "c.d"', {"v": "*.c.d"}, True),
    ('self.v.substring(1, 3) == "bc"', {"v": "abcd"}, True),
    ('self.l.all(h, !isIP(h))', {"l": ["chat.example.com"]}, True),
    ('self.l.all(h, !isIP(h))', {"l": ["10.0.0.1"]}, False),
    ('self.l.all(h, !isIP(h))', {"l": ["2001:db8::1"]}, False),
    ('isIP(self.v)', {"v": "::ffff:10.0.0.1"}, False),  # IPv4-mapped IPv6: refused by Kubernetes' isIP
    ('isIP(self.v)', {"v": "fe80::1%eth0"}, False),  # a zone
])
def test_extension_functions_behave_as_on_the_api_server(rule, spec, ok):
    outcome = _schema(rule).check_create({"apiVersion": "x.io/v1", "kind": "X", "metadata": {"name": "n"},
                                          "spec": spec})
    assert outcome.evaluated == 1
    assert (outcome.violations == []) == ok, [str(v) for v in outcome.violations]


def test_substring_out_of_range_is_an_evaluation_error():
    outcome = _schema('self.v.substring(5) == ""').check_create(
        {"apiVersion": "x.io/v1", "kind": "X", "metadata": {"name": "n"}, "spec": {"v": "ab"}})
    assert [v for v in outcome.violations if "out of range" in v.message]


def test_a_tls_route_with_an_ip_hostname_is_refused(gateway_api):
    crd = gateway_api.get("gateway.networking.k8s.io/v1", "TLSRoute")
    assert crd is not None
    route = {"apiVersion": crd.api_version, "kind": "TLSRoute", "metadata": {"name": "r"},
             "spec": {"hostnames": ["db.example.com"], "parentRefs": [{"name": "gw"}],
                      "rules": [{"backendRefs": [{"name": "db", "port": 5432}]}]}}
    assert not crd.cel.check_create(route).violations
    bad = copy.deepcopy(route)
    bad["spec"]["hostnames"] = ["10.1.2.3"]
    assert any("cannot contain an IP" in str(v) for v in crd.cel.check_create(bad).violations)
