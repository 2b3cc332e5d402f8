"""deploy/kuberay/rayservice.yaml: a valid Serve config, in step with serve_config.yaml, store and token from Secrets."""

from __future__ import annotations

import warnings

import yaml
from ray.serve.schema import ServeDeploySchema

from runtime.settings import PROJECT_ROOT

MANIFEST = PROJECT_ROOT / "deploy" / "kuberay" / "rayservice.yaml"


def documents() -> dict[str, dict]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(MANIFEST.read_text())}


def rayservice() -> dict:
    return documents()["RayService"]


def manifest_serve_config() -> dict:
    return yaml.safe_load(rayservice()["spec"]["serveConfigV2"])


def local_serve_config() -> dict:
    return yaml.safe_load((PROJECT_ROOT / "serve_config.yaml").read_text())


def test_the_serve_config_is_valid_for_serve():
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # e.g. a look-back window Serve will refuse later
        ServeDeploySchema.model_validate(manifest_serve_config())


def test_same_application_and_deployments_as_serve_config_yaml():
    (remote,), (local,) = manifest_serve_config()["applications"], local_serve_config()["applications"]
    assert remote == local  # names, resources, batching, autoscaling, model versions: one truth


def test_the_proxy_listens_on_every_node_and_the_pod_network():
    config = manifest_serve_config()
    assert config["proxy_location"] == "EveryNode"
    assert config["http_options"]["host"] == "0.0.0.0"
    assert config["http_options"]["request_timeout_s"] == local_serve_config()["http_options"]["request_timeout_s"]


def containers() -> list[dict]:
    cluster = rayservice()["spec"]["rayClusterConfig"]
    groups = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    return [c for group in groups for c in group["template"]["spec"]["containers"]]


def test_head_and_a_worker_group_with_the_metrics_port():
    cluster = rayservice()["spec"]["rayClusterConfig"]
    assert cluster["rayVersion"] == __import__("ray").__version__
    assert cluster["authOptions"] == {"mode": "token"}
    assert len(cluster["workerGroupSpecs"]) >= 1
    for group in [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]:
        assert group["rayStartParams"]["metrics-export-port"] == "8080"
    for container in containers():
        assert {"containerPort": 8080, "name": "metrics"} in container["ports"]
        assert container["resources"]["requests"] == container["resources"]["limits"]


def test_every_container_slows_rays_idle_loops_as_make_serve_does():
    from runtime.ray_cluster import IDLE_LOOPS

    for container in containers():
        values = {env["name"]: env.get("value") for env in container["env"]}
        assert {name: values.get(name) for name in IDLE_LOOPS} == IDLE_LOOPS


def test_every_container_gets_the_store_url_from_a_secret_and_no_secret_is_inline():
    for container in containers():
        (redis,) = [env for env in container["env"] if env["name"] == "REDIS_URL"]
        assert set(redis) == {"name", "valueFrom"} and "secretKeyRef" in redis["valueFrom"]
    text = MANIFEST.read_text()
    assert "redis://" not in text.split("apiVersion", 1)[1]  # only in the comment showing how to make the Secret


def test_worker_pods_hold_a_replica_of_each_deployment():
    """A worker pod's CPUs fit the ingress, the policy and one replica of each model."""
    (app,) = manifest_serve_config()["applications"]
    cpus = {d["name"]: d["ray_actor_options"]["num_cpus"] for d in app["deployments"]}
    for group in rayservice()["spec"]["rayClusterConfig"]["workerGroupSpecs"]:
        pod_cpus = float(group["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"])
        assert sum(cpus.values()) <= pod_cpus


def test_every_pod_carries_the_largest_request_a_plan_admits():
    # Uploads go to the ImageModel by reference (no cap); texts ride Serve's inter-replica message, whose cap a pod
    # must not set below what a batch at the largest plan limit needs (what `make serve` checks at start).
    from runtime.preflight import check_model_transport

    for container in containers():
        check_model_transport({variable["name"]: str(variable.get("value", "")) for variable in container.get("env", [])})
