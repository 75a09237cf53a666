"""Everything the harness changes in a bundle to apply it to the loopback control plane, with why.

(The Slurm side's list is tests/slurmharness/overlay.py; this is the Kubernetes side's.) The bundle's
files are never edited: these rules act on what `helm template` renders and on Kueue's
configuration, and on nothing else. Every object not named here is applied exactly as rendered.

1. Webhook configurations whose server is a Service: the API server would call the Service's
   ClusterIP, and there is no pod network here (KWOK fakes pods; nothing listens). Kueue's, whose
   controller runs here as a process, are pointed at its loopback server (`url:` plus this
   cluster's CA, as envtest does); so are LeaderWorkerSet's (Service `lws-webhook-service`: its
   LWS defaulting/validation and the pod webhook that labels a group's pods) where the cluster runs
   the LWS controller (`Cluster(lws=True)`, rule 9); every other controller's (cert-manager,
   GPU/network operator, Volcano, KAI, Slinky, LWS's when it does not run ...) is left out, since
   with `failurePolicy: Fail` it would refuse every object it watches and answer nothing.
2. APIService objects backed by a Service (metrics adapters): left out for the same reason; the
   aggregator would report the group unavailable and discovery (kubectl) would fail.
3. CRD conversion webhooks (`spec.conversion.strategy: Webhook`): set to `None`, same reason; objects
   are applied at the version the bundle writes, so no conversion is needed.
4. Kueue's Configuration (from the chart's rendered ConfigMap, i.e. the bundle's values): the
   webhook server on 127.0.0.1 at a free port with the harness's certificate
   (`internalCertManagement` off: it would write a Secret and patch the webhook configurations for
   the in-cluster Service name), no leader election (one process), probes and metrics on free
   loopback ports. Queueing, waitForPodsReady, TAS, integrations and namespace selectors stay as the
   bundle sets them.
5. Kueue 0.19's manager, with internal certificate management off, reads a metrics-server certificate
   from the fixed path KUEUE_METRICS_CERTS (cmd/kueue/main.go; the chart mounts one there). The
   harness puts a throwaway self-signed one there once (root, or a writable /etc/kueue); nothing
   scrapes those metrics.
6. Kueue's on-demand visibility API server is off (`--feature-gates=VisibilityOnDemand=false`): it
   serves an aggregated API through an APIService (left out by rule 2) and reads its certificate
   from the fixed path /visibility. Admission, queueing and TAS do not use it.
7. CRDs a controller installs at run time, which its chart does not carry: the Network Operator
   applies nv-ipam's IPPool and CIDRPool CRDs itself (its manifests/state-nv-ipam-cni) when a
   NicClusterPolicy enables nv-ipam. Its pod is only faked here, so once the manifests (the
   NicClusterPolicy) are in, the harness applies those two CRDs from
   ../shared/charts/_extra-crds/nv-ipam (RUNTIME_CRDS), as the operator would; the bundle's own
   README `kubectl wait` lines then run as written before kubernetes/operator-resources/ (the IPPool).
8. CRDs the site brings for a workload: Gateway API's (an HTTPRoute of `expose: gateway`) come with
   the site's Gateway controller, which no release of a bundle installs (the bundle README says so).
   Before the workloads that use such a group, the harness applies them from
   ../shared/charts/_extra-crds/gateway-api (SITE_CRDS).
9. LeaderWorkerSet's Configuration (the lws release's ConfigMap `lws-manager-config`, i.e. the
   bundle's values), for the controller manager tests/kubeenv/lws/build.sh builds (v0.9.0: the
   newest the Go module proxy serves the source of; the chart is v0.10.0): the webhook server on
   127.0.0.1 at a free port with the harness's certificate (`internalCertManagement` off: it would
   write the Secret `lws-webhook-server-cert` and patch the webhook configurations for the in-cluster
   Service, whose ClusterIP nothing serves), no leader election (one process), probes and metrics on
   free loopback ports (its defaults :8081 and :8443 listen on every interface and collide between
   parallel clusters). gangSchedulingManagement stays as the bundle sets it.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

KUEUE_METRICS_CERTS = "/etc/kueue/metrics/certs"
KUEUE_FEATURE_GATES = "VisibilityOnDemand=false"
# chart -> directory of ../shared/charts/_extra-crds its controller would apply (rule 7)
RUNTIME_CRDS = {"network-operator": "nv-ipam"}
# API group a workload uses -> directory of ../shared/charts/_extra-crds the site installs it from (rule 8)
SITE_CRDS = {"gateway.networking.k8s.io": "gateway-api"}
WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")


# controllers that run here as processes (rule 1) -> the prefix of their webhook Services' names
LOOPBACK_CONTROLLERS = {"kueue": "kueue-", "lws": "lws-"}


def webhook_controller(obj: dict[str, Any]) -> str | None:
    """Which loopback controller serves a webhook configuration (rule 1), None for any other."""
    if obj.get("kind") not in WEBHOOK_KINDS:
        return None
    for name, prefix in LOOPBACK_CONTROLLERS.items():
        if any((w.get("clientConfig", {}).get("service") or {}).get("name", "").startswith(prefix)
               for w in obj.get("webhooks", [])):
            return name
    return None


def is_kueue_webhook(obj: dict[str, Any]) -> bool:
    return webhook_controller(obj) == "kueue"


def split(objs: list[dict[str, Any]], loopback: tuple[str, ...] = ("kueue",)
          ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """(objects to apply, webhook configurations of the `loopback` controllers to apply once their
    controller runs, what was left out)."""
    keep, hooks, dropped = [], [], []
    for o in objs:
        kind = o.get("kind")
        name = f"{kind}/{o.get('metadata', {}).get('name')}"
        if kind in WEBHOOK_KINDS:
            if webhook_controller(o) in loopback:
                hooks.append(o)
            else:
                dropped.append(name)
            continue
        if kind == "APIService" and o.get("spec", {}).get("service"):
            dropped.append(name)
            continue
        if kind == "CustomResourceDefinition" and \
                (o.get("spec", {}).get("conversion") or {}).get("strategy") == "Webhook":
            o = copy.deepcopy(o)
            o["spec"]["conversion"] = {"strategy": "None"}
        keep.append(o)
    return keep, hooks, dropped


def kueue_webhooks(objs: list[dict[str, Any]], port: int, ca_bundle: str) -> list[dict[str, Any]]:
    out = []
    for o in objs:
        o = copy.deepcopy(o)
        for w in o.get("webhooks", []):
            svc = w["clientConfig"].pop("service")
            w["clientConfig"]["url"] = f"https://127.0.0.1:{port}{svc.get('path', '/')}"
            w["clientConfig"]["caBundle"] = ca_bundle
        o.get("metadata", {}).get("annotations", {}).pop("cert-manager.io/inject-ca-from", None)
        out.append(o)
    return out


# the same rewrite for LeaderWorkerSet's webhooks (rule 1)
loopback_webhooks = kueue_webhooks


def kueue_config(config: dict[str, Any], port: int, certdir: Path, probe: int, metrics: int) -> dict[str, Any]:
    cfg = copy.deepcopy(config)
    cfg["webhook"] = {**cfg.get("webhook", {}), "port": port, "host": "127.0.0.1", "certDir": str(certdir)}
    cfg["internalCertManagement"] = {"enable": False}
    cfg["leaderElection"] = {**cfg.get("leaderElection", {}), "leaderElect": False}
    cfg["health"] = {**cfg.get("health", {}), "healthProbeBindAddress": f"127.0.0.1:{probe}"}
    cfg["metrics"] = {**cfg.get("metrics", {}), "bindAddress": f"127.0.0.1:{metrics}"}
    return cfg


def lws_config(config: dict[str, Any], port: int, certdir: Path, probe: int, metrics: int) -> dict[str, Any]:
    """Rule 9."""
    cfg = copy.deepcopy(config)
    cfg["webhook"] = {**cfg.get("webhook", {}), "port": port, "host": "127.0.0.1", "certDir": str(certdir)}
    cfg["internalCertManagement"] = {"enable": False}
    cfg["leaderElection"] = {**cfg.get("leaderElection", {}), "leaderElect": False}
    cfg["health"] = {**cfg.get("health", {}), "healthProbeBindAddress": f"127.0.0.1:{probe}"}
    cfg["metrics"] = {**cfg.get("metrics", {}), "bindAddress": f"127.0.0.1:{metrics}"}
    return cfg
