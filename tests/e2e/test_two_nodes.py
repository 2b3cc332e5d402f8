"""A real two-node Ray cluster on this machine: model replicas on the second node, requests served by both.

The head node (1 CPU, resource `ingress_node`) runs the proxy, the ingress and the policy; the second node
(1 CPU, resource `model_node`) runs both model deployments, placed there by their ray_actor_options in a
test-only copy of serve_config.yaml. Token authentication as under `make serve`. In a child process of its
own (tests/e2e/scenarios.py), so it never shares a process with the session graph's Ray.
"""

from __future__ import annotations

import pytest
from e2e.scenarios import run_scenario

pytestmark = pytest.mark.e2e


def test_model_replicas_on_the_second_node_serve_requests(tmp_path):
    result = run_scenario("two_nodes", tmp_path, timeout_s=240)
    head, (model_node,) = result["head"], [n for n in result["nodes"] if n != result["head"]]
    replicas = result["replicas"]
    assert replicas["ModerationIngress"] == [head] and replicas["Policy"] == [head]
    assert replicas["ImageModel"] == [model_node] and replicas["TextModel"] == [model_node]
    # Each answer went through both nodes: the ingress and policy on the head, the model on the second node.
    assert result["statuses"] == [200] * 6
    assert set(result["decisions"]) == {"allow"}
