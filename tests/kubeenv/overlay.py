"""Everything the harness changes in a bundle to apply it to the loopback control plane, with why.

(The Slurm side's list is tests/slurmharness/overlay.py; this is the Kubernetes side's.) The bundle's
files are never edited: these rules act on what `helm template` renders and on Kueue's
configuration, and on nothing else. Every object not named here is applied exactly as rendered.

Not a change to what is applied, but how: a chart's CRD that an API server of the same build already
accepted earlier in this test process, byte for byte the same object, is restored from that server's
etcd value instead of applied again (cluster.Cluster.apply_crds; CI time, issue 32). Every CRD's
first apply in a process goes through `kubectl apply --server-side`.

1. Webhook configurations whose server is a Service: the API server would call the Service's
   ClusterIP, and there is no pod network here (KWOK fakes pods; nothing listens). Kueue's, whose
   controller runs here as a process, are pointed at its loopback server (`url:` plus this
   cluster's CA, as envtest does); so are LeaderWorkerSet's (Service `lws-webhook-service`: its
   LWS defaulting/validation and the pod webhook that labels a group's pods) where the cluster runs
   the LWS controller (`Cluster(lws=True)`, rule 9), and Volcano's (Service `volcano-admission-service`)
   where it runs Volcano (`Cluster(volcano=True)`, rule 16); every other controller's (cert-manager,
   GPU/network operator, KAI, Slinky, LWS's and Volcano's when
   they do not run ...) is left out, since
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
   from the fixed path /visibility. Admission, queueing and TAS do not use it. Every other gate is the
   release's own: the manager gets the `--feature-gates` its chart's Deployment passes (the bundle's
   `controllerManager.featureGates`, e.g. ElasticJobsViaWorkloadSlices), this one appended.
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
16. Volcano's scheduler, controller manager and admission webhook server (tests/kubeenv/volcano/build.sh:
   volcano.sh/volcano v1.15.1, the chart's version) run as processes where the cluster runs them
   (`Cluster(volcano=True)`), each with the arguments and environment its Deployment in the volcano
   release renders (the bundle's values), changed only where a pod and a process differ
   (`volcano_processes`): a file the container reads from a mounted ConfigMap (the scheduler's
   volcano-scheduler.conf, the admission volcano-admission.conf) is that ConfigMap's data written to a
   local folder; the admission certificates (the Secret `volcano-admission-secret` that the chart's
   admission-init Job would make; KWOK only fakes that Job) are this cluster's serving certificate and
   CA; an emptyDir is a local empty folder; `--kubeconfig` stands for the pod's in-cluster credentials;
   the webhook server listens on 127.0.0.1 at a free port, and the health and metrics servers (their
   defaults :11251, :8080, :8081 listen on every interface and collide between parallel clusters) on
   free loopback ports. Its webhook configurations (Service `volcano-admission-service`) are pointed
   at that server (rule 1) before it starts: it waits for them to exist to put its CA in them.
   The components are v1.14.1, the chart v1.15.1 (tests/kubeenv/README.md: the proxy serves no source of
   1.15's API module): of the chart's arguments, v1.14.1 lacks only the controller manager's
   `--sharding-configmap` and `--sharding-configmap-namespace` (1.15's node-sharding controller, which
   feeds scheduler sharding; the bundle leaves sharding off: the scheduler runs
   `--scheduler-sharding-mode` none, its default, and the chart's sharding ConfigMap is empty). Those two
   are left out (VOLCANO_UNKNOWN_FLAGS); every other argument is passed as rendered.

The Flux delivery path (tests/test_flux_real.py) reads the bundle from a Git repository served on
loopback (tests/kubeenv/gitops.py). The bundle's files are committed there unchanged but for these,
made in the committed copy, never in the bundle:
10. Flux's bootstrap (`flux bootstrap git`, which the bundle README has the site run): its
   GitRepository `flux-system` names the site's repository; here it names the loopback Git server
   (`flux_bootstrap`), and the Kustomization `flux-system` syncs `clusters/<name>/` of it, where the
   README has the site copy `gitops/bootstrap/flux-kustomization.yaml`. Flux's controllers run as
   processes (tests/kubeenv/flux/build.sh), not as the bootstrap's Deployments: the harness applies
   only the bootstrap's CRDs (each controller's config/crd/bases at the built version), namespace
   and these two objects.
11. `gitops/releases/sources.yaml`: each HelmRepository's `url` (a public chart repository, which the
   machine cannot reach) becomes the loopback Helm repository that serves the same chart version from
   ../shared/charts (`helm package`, `helm repo index`); each OCIRepository's `url` becomes the same
   path on the loopback OCI registry (`helm push` of that chart), with `insecure: true`, because that
   registry speaks plain HTTP on 127.0.0.1 (a public registry speaks HTTPS). Tags and versions stay.
12. Each HelmRelease gets `spec.postRenderers` (helm-controller's kustomize post-renderer) that do to
   what it installs what rules 1 to 3 do to `helm template`'s output on the Helm/kubectl path: delete
   the webhook configurations and APIServices of controllers that do not run here, set webhook CRD
   conversion to None, and point Kueue's webhooks at its loopback server. Nothing else of a release
   changes (values, chart, version, dependsOn, remediation are as the bundle writes them).
13. source-controller advertises its artifact server at its loopback address (`--storage-adv-addr`),
   where Flux's install gives its Service's in-cluster name. Flux's controllers re-check a dependency
   every 5 s (`--requeue-dependency`, default 30 s) so the test does not wait out the default.

The Pulumi path (tests/test_pulumi_kube_real.py) runs the bundle's own program (pulumi/__main__.py) with
the real Pulumi CLI and pulumi-kubernetes; the bundle's files are unchanged and the harness acts only
through the stack config a site sets:
14. `orchgen:chartRepository`: the loopback Helm repository that serves every chart of releases.yaml from
   ../shared/charts (`helm package`, `helm repo index`), the site chart mirror the program supports.
15. `orchgen:helmPostRenderer`: a Helm post-renderer (`post_render` below) that does to each release what
   rules 1 to 3 do to `helm template`'s output. Kueue's controller runs here as a process (rule 4 to 6),
   started once its release's ConfigMap is in; its pods are left unready by KWOK (`Cluster(hold_ready=)`)
   and marked Ready once that process serves its webhooks, as a kubelet would once the pod's readiness
   probe passes, so `pulumi up` goes on to Kueue's objects only when its webhooks answer.
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
LOOPBACK_CONTROLLERS = {"kueue": "kueue-", "lws": "lws-", "volcano": "volcano-admission-"}


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


# Volcano's images (the chart's Deployments) -> the binary tests/kubeenv/volcano/build.sh builds (rule 16)
VOLCANO_IMAGES = ("vc-webhook-manager", "vc-controller-manager", "vc-scheduler")
# the chart's (v1.15.1) arguments the built components (v1.14.1) do not know, left out (rule 16)
VOLCANO_UNKNOWN_FLAGS = {"vc-controller-manager": ("--sharding-configmap", "--sharding-configmap-namespace")}


def _set_flag(args: list[str], flag: str, value: str) -> list[str]:
    """`--flag=value` in place of the chart's `--flag=...`, else added."""
    out = [a for a in args if not (a == flag or a.startswith(flag + "="))]
    return out + [f"{flag}={value}"]


def volcano_processes(rendered: list[dict[str, Any]], workdir: Path, certs: Path, kubeconfig: Path,
                      webhook_port: int, free_port) -> list[tuple[str, list[str], dict[str, str]]]:
    """Rule 16: (binary, arguments, environment) of each Volcano component the release deploys, in
    start order (webhook server, controller manager, scheduler)."""
    import yaml

    cms = {o["metadata"]["name"]: o.get("data") or {} for o in rendered if o.get("kind") == "ConfigMap"}
    found: dict[str, tuple[str, list[str], dict[str, str]]] = {}
    for o in rendered:
        if o.get("kind") != "Deployment":
            continue
        pod = o["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod.get("volumes") or []}
        for c in pod["containers"]:
            image = c["image"].rsplit("/", 1)[-1].split(":")[0]
            if image not in VOLCANO_IMAGES:
                continue
            paths: dict[str, str] = {}  # mount path in the container -> local folder
            for m in c.get("volumeMounts") or []:
                local = workdir / o["metadata"]["name"] / m["name"]
                local.mkdir(parents=True, exist_ok=True)
                vol = volumes[m["name"]]
                if "configMap" in vol:
                    for key, text in cms[vol["configMap"]["name"]].items():
                        (local / key).write_text(text)
                elif "secret" in vol:  # the admission certificates
                    for key, src in (("tls.crt", "tls.crt"), ("tls.key", "tls.key"), ("ca.crt", "ca.crt")):
                        (local / key).write_bytes((certs / src).read_bytes())
                paths[m["mountPath"].rstrip("/")] = str(local)

            def local_path(text: str) -> str:
                for mount, local in paths.items():
                    text = text.replace(mount, local)
                return text

            args = [local_path(a) for a in c.get("args") or []
                    if a.split("=", 1)[0] not in VOLCANO_UNKNOWN_FLAGS.get(image, ())]
            env = {e["name"]: local_path(str(e["value"])) for e in c.get("env") or [] if "value" in e}
            args = _set_flag(args, "--kubeconfig", str(kubeconfig))
            args = _set_flag(args, "--healthz-address", f"127.0.0.1:{free_port()}")
            if image == "vc-webhook-manager":
                args = _set_flag(args, "--listen-address", "127.0.0.1")
                args = _set_flag(args, "--port", str(webhook_port))
            else:
                args = _set_flag(args, "--listen-address", f"127.0.0.1:{free_port()}")
            found[image] = (image, args, env)
    missing = [i for i in VOLCANO_IMAGES if i not in found]
    assert not missing, f"the volcano release renders no Deployment of {missing}"
    (workdir / "processes.yaml").write_text(yaml.safe_dump([list(found[i]) for i in VOLCANO_IMAGES]))
    return [found[i] for i in VOLCANO_IMAGES]


# ---- the Flux delivery path (rules 10 to 13) ---------------------------------------------------------
FLUX_NAMESPACE = "flux-system"


def flux_bootstrap(git_url: str, cluster_path: str, branch: str = "main") -> list[dict[str, Any]]:
    """Rule 10: what `flux bootstrap git --url=... --branch=main --path=<cluster_path>` creates to sync
    the repository, pointed at the loopback Git server (the bootstrap's intervals)."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FLUX_NAMESPACE}},
        {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
         "metadata": {"name": "flux-system", "namespace": FLUX_NAMESPACE},
         "spec": {"interval": "1m0s", "ref": {"branch": branch}, "url": git_url}},
        {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
         "metadata": {"name": "flux-system", "namespace": FLUX_NAMESPACE},
         "spec": {"interval": "10m0s", "path": f"./{cluster_path}", "prune": True,
                  "sourceRef": {"kind": "GitRepository", "name": "flux-system"}}}]


def flux_sources(objs: list[dict[str, Any]], helm_repo_url, oci_host: str) -> list[dict[str, Any]]:
    """Rule 11: `helm_repo_url(original url) -> loopback url`; OCI urls keep their path on `oci_host`."""
    out = []
    for o in objs:
        o = copy.deepcopy(o)
        if o["kind"] == "HelmRepository":
            o["spec"]["url"] = helm_repo_url(o["spec"]["url"])
        elif o["kind"] == "OCIRepository":
            path = o["spec"]["url"].removeprefix("oci://").split("/", 1)[1]
            o["spec"]["url"] = f"oci://{oci_host}/{path}"
            o["spec"]["insecure"] = True
        out.append(o)
    return out


def flux_post_renderers(rendered: list[dict[str, Any]], kueue_port: int, ca_bundle: str) -> list[dict[str, Any]]:
    """Rule 12: the post-renderer patches for a release whose `helm template` output is `rendered`."""
    keep, hooks, dropped = split(copy.deepcopy(rendered), ("kueue",))
    patches: list[dict[str, Any]] = []
    by_name = {f"{o.get('kind')}/{o.get('metadata', {}).get('name')}": o for o in rendered}
    for name in dropped:
        o = by_name[name]
        patches.append({"target": {"kind": o["kind"], "name": o["metadata"]["name"]},
                        "patch": f"$patch: delete\napiVersion: {o['apiVersion']}\nkind: {o['kind']}\n"
                                 f"metadata:\n  name: {o['metadata']['name']}\n"})
    for o in rendered:
        if o.get("kind") == "CustomResourceDefinition" and \
                (o.get("spec", {}).get("conversion") or {}).get("strategy") == "Webhook":
            patches.append({"target": {"kind": o["kind"], "name": o["metadata"]["name"]},
                            "patch": "- op: replace\n  path: /spec/conversion\n  value: {strategy: None}\n"})
    for o in kueue_webhooks(hooks, kueue_port, ca_bundle):
        ops = [{"op": "replace", "path": f"/webhooks/{i}/clientConfig", "value": w["clientConfig"]}
               for i, w in enumerate(o["webhooks"])]
        import yaml

        patches.append({"target": {"kind": o["kind"], "name": o["metadata"]["name"]},
                        "patch": yaml.safe_dump(ops)})
    return [{"kustomize": {"patches": patches}}] if patches else []


# ---- the Pulumi path (rules 14 and 15) --------------------------------------------------------------
def post_render(manifests: str, kueue_port: int, ca_bundle: str) -> str:
    """Rule 15: a release's rendered manifests (a Helm post-renderer's stdin) with rules 1 to 3 applied."""
    import yaml

    objs = [o for o in yaml.safe_load_all(manifests) if o]
    keep, hooks, _ = split(objs, ("kueue",))
    return yaml.safe_dump_all(keep + kueue_webhooks(hooks, kueue_port, ca_bundle), sort_keys=False)


def post_renderer_script(path: Path, kueue_port: int, ca_bundle: str) -> Path:
    """An executable post-renderer (Helm runs it by path, without arguments) that calls post_render."""
    import sys

    repo = Path(__file__).resolve().parents[2]
    path.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(repo)!r})\n"
                    "from tests.kubeenv.overlay import post_render\n"
                    f"sys.stdout.write(post_render(sys.stdin.read(), {kueue_port}, {ca_bundle!r}))\n")
    path.chmod(0o755)
    return path
