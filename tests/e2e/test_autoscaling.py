"""Under a bounded load the TextModel deployment scales up to 2 replicas, and back to 1 after the load.

A test-only copy of serve_config.yaml with quick autoscaling (target 1 ongoing request, 1 s up, 3 s down),
run in a child process of its own (tests/e2e/scenarios.py). The figures are printed for the README.
"""

from __future__ import annotations

import pytest
from e2e.scenarios import run_scenario

pytestmark = pytest.mark.e2e


def test_text_model_scales_up_under_load_and_down_after(tmp_path):
    result = run_scenario("autoscaling", tmp_path, timeout_s=300)
    print(result)
    assert result["scaled_up_s"] is not None and result["scaled_up_s"] <= 60, result
    assert result["peak_replicas"] == 2
    assert result["scaled_down_s"] is not None and result["scaled_down_s"] <= 60, result
    assert result["statuses"] == [200], result  # no request failed while replicas came and went
