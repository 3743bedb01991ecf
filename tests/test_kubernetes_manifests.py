"""deploy/kubernetes/ is valid Kubernetes, and wired to the code it deploys.

Offline, no cluster:
- Core kinds validate against the Kubernetes OpenAPI schemas that `kubernetes-validate` (pinned
  in the `test` extra) bundles, in strict mode (an unknown or misspelt field fails), for the
  oldest and the newest Kubernetes version checked here; the Job inside the JobSet validates as a
  batch/v1 Job.
- Custom resources (PodMonitor, PrometheusRule, JobSet) have no bundled schema: their fields
  are checked against the ones their CRDs define (Prometheus Operator 0.93, JobSet 0.12; the
  key sets below), and the PrometheusRule's groups must equal alerts/triage-rules.yml, of which
  it is generated (deploy/kubernetes/generate.py).
- Every `triage` command line in a container parses with the CLI's own parser and builds its
  config, so a renamed or removed flag fails here; ports, paths, labels, node names and the
  scrape job name must agree across the objects and with what the code and the rules expect.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from triage.cli import EXIT_FAILURE_FOUND, EXIT_USAGE, build_parser
from triage.commands import agent as agent_command
from triage.config import ENV_DATA_DIR, ENV_JOB_ID, ENV_NODE, config_from_args
from triage.reference_trainer.train_config import TrainConfig
from triage.supervisor.config import SupervisorConfig

ROOT = Path(__file__).resolve().parents[1]
KUBE = ROOT / "deploy" / "kubernetes"
EXAMPLES = KUBE / "examples"
RULES = ROOT / "alerts" / "triage-rules.yml"
README = ROOT / "README.md"

#: The oldest Kubernetes the manifests support and the newest schema kubernetes-validate has.
KUBERNETES_VERSIONS = ("1.30", "1.37")
CORE_KINDS = {"Namespace", "ServiceAccount", "PersistentVolumeClaim", "DaemonSet", "Service", "Pod"}
CRD_KINDS = {"PodMonitor", "PrometheusRule", "JobSet"}

# Fields the CRDs define (prometheus-operator example/prometheus-operator-crd, operator 0.93.0;
# kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go, v0.12). The API server prunes
# unknown fields of a custom resource silently, so a misspelt one would only vanish: fail here.
PODMONITOR_SPEC_KEYS = {
    "attachMetadata", "bodySizeLimit", "convertClassicHistogramsToNHCB", "fallbackScrapeProtocol",
    "jobLabel", "keepDroppedTargets", "labelLimit", "labelNameLengthLimit", "labelValueLengthLimit",
    "namespaceSelector", "nativeHistogramBucketLimit", "nativeHistogramMinBucketFactor",
    "podMetricsEndpoints", "podTargetLabels", "sampleLimit", "scrapeClass", "scrapeClassicHistograms",
    "scrapeNativeHistograms", "scrapeProtocols", "selector", "selectorMechanism", "targetLimit",
}  # fmt: skip
PODMONITOR_ENDPOINT_KEYS = {
    "authorization", "basicAuth", "bearerTokenSecret", "enableHttp2", "filterRunning", "followRedirects",
    "honorLabels", "honorTimestamps", "interval", "metricRelabelings", "noProxy", "oauth2", "params",
    "path", "port", "portNumber", "proxyConnectHeader", "proxyFromEnvironment", "proxyUrl", "relabelings",
    "scheme", "scrapeTimeout", "targetPort", "tlsConfig", "trackTimestampsStaleness",
}  # fmt: skip
JOBSET_SPEC_KEYS = {
    "replicatedJobs", "network", "successPolicy", "failurePolicy", "startupPolicy", "suspend",
    "coordinator", "managedBy", "ttlSecondsAfterFinished", "volumeClaimPolicies",
}  # fmt: skip
JOBSET_REPLICATED_JOB_KEYS = {"name", "groupName", "template", "replicas", "dependsOn"}
JOBSET_FAILURE_POLICY_KEYS = {"maxRestarts", "restartStrategy", "rules"}
JOBSET_RULE_KEYS = {
    "name",
    "action",
    "onJobFailureReasons",
    "onJobFailureMessagePatterns",
    "targetReplicatedJobs",
}
JOBSET_ACTIONS = {
    "FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts", "RestartJob",
    "RestartJobAndIgnoreMaxRestarts",
}  # fmt: skip
#: batch/v1 Job failure reasons (the Job condition's reason a JobSet rule matches on).
JOB_FAILURE_REASONS = {
    "BackoffLimitExceeded",
    "DeadlineExceeded",
    "PodFailurePolicy",
    "MaxFailedIndexesExceeded",
}

#: A Prometheus duration, as the Operator's CRDs pattern it.
_DURATION = r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
#: spec.groups of a PrometheusRule (monitoring.coreos.com_prometheusrules.yaml, operator 0.82+).
PROMETHEUS_RULE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["groups"],
            "properties": {
                "groups": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name", "rules"],
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "interval": {"type": "string", "pattern": _DURATION},
                            "query_offset": {"type": "string", "pattern": _DURATION},
                            "labels": _STRING_MAP,
                            "limit": {"type": "integer"},
                            "partial_response_strategy": {"type": "string"},
                            "rules": {
                                "type": "array",
                                "minItems": 1,
                                "items": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "required": ["expr"],
                                    "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
                                    "properties": {
                                        "alert": {"type": "string"},
                                        "record": {"type": "string"},
                                        "expr": {"type": ["string", "integer"]},
                                        "for": {"type": "string", "pattern": _DURATION},
                                        "keep_firing_for": {"type": "string", "pattern": _DURATION},
                                        "labels": _STRING_MAP,
                                        "annotations": _STRING_MAP,
                                    },
                                },
                            },
                        },
                    },
                }
            },
        }
    },
}


# -- loading ----------------------------------------------------------------------------------


def _load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def _manifest_files() -> list[Path]:
    return sorted(p for p in KUBE.glob("*.yaml") if p.name != "kustomization.yaml") + sorted(
        EXAMPLES.glob("*.yaml")
    )


def _objects() -> list[tuple[Path, dict[str, Any]]]:
    return [(path, obj) for path in _manifest_files() for obj in _load(path)]


def _one(kind: str) -> dict[str, Any]:
    found = [obj for _, obj in _objects() if obj["kind"] == kind]
    assert len(found) == 1, f"expected one {kind} under deploy/kubernetes, found {len(found)}"
    return found[0]


def _kustomization() -> dict[str, Any]:
    return _load(KUBE / "kustomization.yaml")[0]


def _pod_specs() -> Iterator[tuple[str, dict[str, Any]]]:
    """(object name, pod spec) of every object that runs pods."""
    for _, obj in _objects():
        if obj["kind"] == "Pod":
            yield obj["metadata"]["name"], obj["spec"]
        elif obj["kind"] == "DaemonSet":
            yield obj["metadata"]["name"], obj["spec"]["template"]["spec"]
        elif obj["kind"] == "JobSet":
            for rjob in obj["spec"]["replicatedJobs"]:
                yield (
                    f"{obj['metadata']['name']}/{rjob['name']}",
                    rjob["template"]["spec"]["template"]["spec"],
                )


def _container(pod_spec: dict[str, Any], name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [c for c in pod_spec["containers"] if c["name"] == name]
    assert found, f"no container {name!r} in {[c['name'] for c in pod_spec['containers']]}"
    return found[0]


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def _mounts(
    pod_spec: dict[str, Any], container: dict[str, Any]
) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """mountPath -> (volume, volumeMount)."""
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    return {m["mountPath"]: (volumes[m["name"]], m) for m in container.get("volumeMounts", [])}


def _data_mount_path(pod_spec: dict[str, Any], container: dict[str, Any], claim: str) -> str:
    paths = [
        path
        for path, (volume, _) in _mounts(pod_spec, container).items()
        if volume.get("persistentVolumeClaim", {}).get("claimName") == claim
    ]
    assert len(paths) == 1, f"container {container['name']} should mount claim {claim} once, mounts {paths}"
    return paths[0]


def _parse_cli(argv: list[str], where: str) -> argparse.Namespace:
    """`triage ARGV...` through the CLI's own parser; a flag it does not know fails the test."""
    assert argv[:1] == ["triage"], f"{where}: expected a `triage` command line, got {argv[:3]}"
    try:
        parsed: argparse.Namespace = build_parser(argv[1]).parse_args(argv[1:])
    except SystemExit as exc:  # argparse printed why on stderr
        pytest.fail(f"{where}: `{' '.join(argv)}` does not parse with triage's CLI (exit {exc.code})")
    return parsed


def _command_line(container: dict[str, Any]) -> list[str]:
    return [str(a) for a in [*container.get("command", []), *container.get("args", [])]]


def _quantity(value: str | int | float) -> float:
    """A Kubernetes resource quantity in base units (cores, bytes)."""
    text = str(value)
    for suffix, factor in (
        ("Ki", 2**10), ("Mi", 2**20), ("Gi", 2**30), ("Ti", 2**40),
        ("m", 1e-3), ("k", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12),
    ):  # fmt: skip
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text)


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("triage_k8s_generate", KUBE / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- every object ------------------------------------------------------------------------------


def test_every_object_is_a_known_kind_with_identity() -> None:
    objects = _objects()
    assert {obj["kind"] for _, obj in objects} == CORE_KINDS | CRD_KINDS, (
        "a kind was added or removed: validate it here (core kinds by schema, CRDs by hand)"
    )
    for path, obj in objects:
        where = f"{path.relative_to(ROOT)}: {obj.get('kind')}"
        assert isinstance(obj.get("apiVersion"), str) and obj["apiVersion"], where
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", obj["metadata"]["name"]), where
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "triage", where


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_core_kinds_validate_strictly(version: str) -> None:
    checked = []
    for path, obj in _objects():
        if obj["kind"] in CORE_KINDS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                pytest.fail(
                    f"{path.relative_to(ROOT)}: {obj['kind']}/{obj['metadata']['name']} is not valid "
                    f"Kubernetes {version}: {'.'.join(map(str, exc.path))}: {exc.message}"
                )
            checked.append(obj["kind"])
    assert set(checked) == CORE_KINDS


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_jobset_jobs_validate_strictly_as_batch_jobs(version: str) -> None:
    jobset = _one("JobSet")
    for rjob in jobset["spec"]["replicatedJobs"]:
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                **rjob["template"].get("metadata", {}),
                "name": f"{jobset['metadata']['name']}-{rjob['name']}-0",
            },
            "spec": rjob["template"]["spec"],
        }
        try:
            kubernetes_validate.validate(job, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(
                f"JobSet {jobset['metadata']['name']}, replicatedJob {rjob['name']}: not a valid batch/v1 "
                f"Job template on Kubernetes {version}: {'.'.join(map(str, exc.path))}: {exc.message}"
            )


def test_strict_validation_rejects_a_misspelt_field() -> None:
    """The check above has teeth: the pinned schemas are strict and reach into pod specs."""
    daemonset = copy.deepcopy(_one("DaemonSet"))
    daemonset["spec"]["template"]["spec"]["hostPid"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(daemonset, KUBERNETES_VERSIONS[0], strict=True)


# -- kustomization -----------------------------------------------------------------------------


def test_kustomization_applies_every_manifest_but_the_examples() -> None:
    kustomization = _kustomization()
    assert kustomization["apiVersion"] == "kustomize.config.k8s.io/v1beta1"
    assert kustomization["kind"] == "Kustomization"
    assert set(kustomization) <= {"apiVersion", "kind", "namespace", "resources", "images", "labels"}
    listed = kustomization["resources"]
    on_disk = sorted(p.name for p in KUBE.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed) == on_disk, "kustomization.yaml's resources must list every manifest beside it"
    namespace = _one("Namespace")["metadata"]["name"]
    assert kustomization["namespace"] == namespace
    # The examples are applied with -f, outside the kustomization: their namespace is explicit,
    # and must be the one of the data claim (a claim is namespaced).
    for path in EXAMPLES.glob("*.yaml"):
        for obj in _load(path):
            assert obj["metadata"].get("namespace") == namespace, f"{path.name}: {obj['kind']} namespace"
    images = {entry["name"] for entry in kustomization["images"]}
    for name, pod_spec in _pod_specs():
        for container in pod_spec["containers"]:
            if container["image"].startswith("triage"):
                assert container["image"].split(":")[0] in images, (
                    f"{name}: image not mapped by kustomization"
                )


# -- the alert rules ---------------------------------------------------------------------------


def test_prometheus_rule_is_generated_from_the_rules_file() -> None:
    generator = _generator()
    committed = (KUBE / "prometheus-rule.yaml").read_text()
    assert committed == generator.render(), (
        "deploy/kubernetes/prometheus-rule.yaml differs from alerts/triage-rules.yml: regenerate it "
        "with `.venv/bin/python deploy/kubernetes/generate.py` and commit both"
    )
    rule = _one("PrometheusRule")
    assert rule["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]


def test_generate_check_fails_on_a_stale_manifest_and_says_how_to_regenerate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    generator = _generator()
    assert generator.main(["--check"]) == 0
    stale = tmp_path / "prometheus-rule.yaml"
    stale.write_text(generator.render().replace("for: 1m", "for: 2m", 1))
    monkeypatch.setattr(generator, "OUTPUT", stale)
    assert generator.main(["--check"]) == 1
    assert "deploy/kubernetes/generate.py" in capsys.readouterr().err


def test_prometheus_rule_fits_the_operator_crd() -> None:
    rule = _one("PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    errors = sorted(jsonschema.Draft202012Validator(PROMETHEUS_RULE_SCHEMA).iter_errors(rule), key=str)
    assert not errors, "\n".join(f"{'.'.join(map(str, e.path))}: {e.message}" for e in errors[:10])


# -- the agent ---------------------------------------------------------------------------------


def _agent() -> tuple[dict[str, Any], dict[str, Any], argparse.Namespace]:
    daemonset = _one("DaemonSet")
    pod_spec = daemonset["spec"]["template"]["spec"]
    container = _container(pod_spec, "agent")
    args = _parse_cli(_command_line(container), "agent-daemonset.yaml")
    assert args.command == "agent"
    return pod_spec, container, args


def test_agent_command_parses_and_builds_its_config() -> None:
    _, _, args = _agent()
    config = agent_command.config_from(args)
    assert config.bind == "0.0.0.0", "--bind must let Prometheus reach /metrics on the pod IP"
    assert config.gpu == "nvml", "--gpu auto runs blind where NVML does not initialise"
    assert config.kernel.kernel_log == "kmsg"


def test_agent_reads_the_node_name_from_the_downward_api() -> None:
    _, container, _ = _agent()
    node = _env(container)[ENV_NODE]
    assert node["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"


def test_agent_serves_metrics_where_service_podmonitor_and_annotations_look() -> None:
    daemonset = _one("DaemonSet")
    _, container, args = _agent()
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == args.port
    assert container["readinessProbe"]["httpGet"] == {"path": "/metrics", "port": "metrics"}
    annotations = daemonset["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(args.port)
    service = _one("Service")
    assert service["spec"]["clusterIP"] == "None", "the agents' service is headless"
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(args.port, "metrics")]
    pod_labels = daemonset["spec"]["template"]["metadata"]["labels"]
    assert daemonset["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert service["spec"]["selector"].items() <= pod_labels.items()


def test_agent_mounts_dev_kmsg_read_only_with_the_privilege_it_needs() -> None:
    pod_spec, container, _ = _agent()
    volume, mount = _mounts(pod_spec, container)["/dev/kmsg"]
    assert volume["hostPath"] == {"path": "/dev/kmsg", "type": "CharDevice"}
    assert mount["readOnly"] is True
    # the device cgroup admits /dev/kmsg only to a privileged container (agent-daemonset.yaml)
    assert container["securityContext"]["privileged"] is True
    assert pod_spec["hostPID"] is True


def test_agent_reaches_nvml_without_taking_a_gpu() -> None:
    pod_spec, container, _ = _agent()
    env = _env(container)
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"]["value"] == "utility"
    assert pod_spec["runtimeClassName"] == "nvidia"
    for kind in ("requests", "limits"):
        assert "nvidia.com/gpu" not in container["resources"].get(kind, {}), "the agent must not take GPUs"


def test_agent_runs_on_every_gpu_node_one_at_a_time() -> None:
    daemonset = _one("DaemonSet")
    pod_spec = daemonset["spec"]["template"]["spec"]
    assert pod_spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists"} in pod_spec["tolerations"]
    # a second agent on a node exits 2 while the first holds the node's partition
    assert daemonset["spec"]["updateStrategy"]["rollingUpdate"]["maxSurge"] == 0


def _bench_figures() -> tuple[float, float]:
    """(CPU share of one core, upper end; peak RSS in MB) that the README gives for `triage
    bench agent`."""
    match = re.search(
        r"reference machine: (\d+(?:\.\d+)?)-(\d+(?:\.\d+)?)% of one core and (\d+) MB peak RSS",
        README.read_text(),
    )
    assert match, "README's `triage bench agent` figures (Agent section) not found"
    return float(match[2]) / 100, float(match[3]) * 1e6


def test_agent_resources_cover_the_bench_figures_with_headroom() -> None:
    cpu_share, peak_rss = _bench_figures()
    _, container, _ = _agent()
    requests, limits = container["resources"]["requests"], container["resources"]["limits"]
    assert _quantity(requests["cpu"]) >= 2 * cpu_share, "cpu request below twice the bench's CPU"
    assert _quantity(requests["memory"]) >= 1.2 * peak_rss, "memory request below the bench's peak RSS + 20%"
    # catch-up ingests peak at about twice the steady RSS (agent-daemonset.yaml): the limit too
    assert _quantity(limits["memory"]) >= 2 * _quantity(requests["memory"]) * 0.9
    assert _quantity(limits["cpu"]) >= 5 * _quantity(requests["cpu"])
    # the derivation in the manifest quotes the figures it was made from: rerun it when they move
    daemonset_text = (KUBE / "agent-daemonset.yaml").read_text()
    readme_figures = f"{cpu_share * 100:g}% of one core and {peak_rss / 1e6:g} MB peak RSS"
    assert readme_figures in " ".join(daemonset_text.replace("#", " ").split()), (
        f"README's bench figures moved ({readme_figures}): derive the agent's resources again"
    )


# -- scraping ----------------------------------------------------------------------------------


def test_podmonitor_scrapes_the_agents_as_the_rules_expect() -> None:
    podmonitor = _one("PodMonitor")
    daemonset = _one("DaemonSet")
    assert podmonitor["apiVersion"] == "monitoring.coreos.com/v1"
    spec = podmonitor["spec"]
    assert set(spec) <= PODMONITOR_SPEC_KEYS, set(spec) - PODMONITOR_SPEC_KEYS
    pod_labels = daemonset["spec"]["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= pod_labels.items()
    [endpoint] = spec["podMetricsEndpoints"]
    assert set(endpoint) <= PODMONITOR_ENDPOINT_KEYS, set(endpoint) - PODMONITOR_ENDPOINT_KEYS
    assert endpoint["port"] == "metrics"
    assert endpoint["path"] == "/metrics"
    assert endpoint["honorLabels"] is True, "the training job's `job` label must win (README)"
    for key in ("interval", "scrapeTimeout"):
        assert re.fullmatch(_DURATION, endpoint[key]), key
    # The scrape job's name comes from the pods' jobLabel label; the agent-down rules select it.
    scrape_jobs = set(re.findall(r'\bup\{job="([^"]+)"\}', RULES.read_text()))
    assert scrape_jobs, "the rules no longer select the agents' up series"
    assert {pod_labels[spec["jobLabel"]]} == scrape_jobs


# -- the data volume ---------------------------------------------------------------------------


def test_data_directory_is_one_shared_volume_at_one_path() -> None:
    pvc = _one("PersistentVolumeClaim")
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"], "one store for all nodes: ReadWriteMany"
    claim = pvc["metadata"]["name"]
    seen = {}
    for name, pod_spec in _pod_specs():
        container = pod_spec["containers"][0]
        path = _data_mount_path(pod_spec, container, claim)
        assert _env(container)[ENV_DATA_DIR]["value"] == path, f"{name}: {ENV_DATA_DIR} is not the mount"
        seen[name] = path
    assert len(set(seen.values())) == 1, seen
    _, _, args = _agent()
    assert args.data_dir == next(iter(seen.values()))


# -- the example job ---------------------------------------------------------------------------


def _trainer() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    jobset = _one("JobSet")
    [rjob] = jobset["spec"]["replicatedJobs"]
    job_spec = rjob["template"]["spec"]
    pod_spec = job_spec["template"]["spec"]
    return job_spec, pod_spec, _container(pod_spec, "trainer")


def test_jobset_fits_its_crd() -> None:
    jobset = _one("JobSet")
    assert jobset["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    spec = jobset["spec"]
    assert set(spec) <= JOBSET_SPEC_KEYS, set(spec) - JOBSET_SPEC_KEYS
    for rjob in spec["replicatedJobs"]:
        assert set(rjob) <= JOBSET_REPLICATED_JOB_KEYS, set(rjob) - JOBSET_REPLICATED_JOB_KEYS
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", rjob["name"])
    policy = spec["failurePolicy"]
    assert set(policy) <= JOBSET_FAILURE_POLICY_KEYS
    for rule in policy["rules"]:
        assert set(rule) <= JOBSET_RULE_KEYS
        assert rule["action"] in JOBSET_ACTIONS
        assert re.fullmatch(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?", rule["name"])
        assert set(rule.get("onJobFailureReasons", [])) <= JOB_FAILURE_REASONS


def test_jobset_runs_the_reference_trainer_under_the_supervisor(monkeypatch: pytest.MonkeyPatch) -> None:
    job_spec, pod_spec, container = _trainer()
    env = _env(container)
    run_args = _parse_cli(_command_line(container), "examples/jobset-reference-trainer.yaml")
    assert run_args.command == "run"
    supervisor = config_from_args(SupervisorConfig, run_args)
    assert supervisor.agents == "none", "the cluster's agents are the DaemonSet's"
    inner = list(run_args.cmd)
    inner = inner[1:] if inner[:1] == ["--"] else inner
    train_args = _parse_cli(inner, "examples/jobset-reference-trainer.yaml (after --)")
    assert train_args.command == "train"
    # what `triage run` passes the trainer, and the container's own environment
    monkeypatch.setenv(ENV_JOB_ID, str(supervisor.job_id))
    monkeypatch.setenv(ENV_DATA_DIR, env[ENV_DATA_DIR]["value"])
    train = config_from_args(TrainConfig, train_args)
    # a real node, named by its agent's name for it: not the demo's simulated node0, node1, ...
    assert train.node_rank is not None, "without --node-rank, triage train starts simulated nodes"
    assert env[ENV_NODE]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert train.nnodes == 1 and train.rdzv_endpoint is not None
    assert train.rdzv_endpoint.rpartition(":")[0] in {"127.0.0.1", "localhost"}
    gpus = int(container["resources"]["limits"]["nvidia.com/gpu"])
    assert train.nproc_per_node == gpus, "one rank per GPU the pod was given"
    assert Path(str(train.run_dir)).is_relative_to(env[ENV_DATA_DIR]["value"]), (
        "checkpoints on the shared volume"
    )
    # RANK in the pod's environment would make the supervisor take `triage train` for rank 0
    assert "RANK" not in env
    # `triage run` exits 1 (failed, gave up) or 2 (bad usage): final; anything else may be retried
    rules = job_spec["podFailurePolicy"]["rules"]
    fail = [r for r in rules if r["action"] == "FailJob"]
    assert [r["onExitCodes"] for r in fail] == [
        {"containerName": "trainer", "operator": "In", "values": [EXIT_FAILURE_FOUND, EXIT_USAGE]}
    ]
    assert pod_spec["restartPolicy"] == "Never"
    # the pod's grace outlasts the supervisor's own SIGTERM -> SIGKILL grace, with time to record
    assert pod_spec["terminationGracePeriodSeconds"] >= supervisor.grace + 30


def test_jobset_lands_where_the_agents_run() -> None:
    _, pod_spec, _ = _trainer()
    agent_spec = _one("DaemonSet")["spec"]["template"]["spec"]
    assert pod_spec["nodeSelector"].items() <= agent_spec["nodeSelector"].items()
    for toleration in agent_spec["tolerations"]:
        assert toleration in pod_spec["tolerations"] or toleration["key"] != "nvidia.com/gpu"
