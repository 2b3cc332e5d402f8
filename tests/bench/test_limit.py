"""The raw limit's workers report a failure with its cause instead of leaving `measure` to wait out its timeout."""

from __future__ import annotations

import pytest

from bench import limit


def test_a_worker_that_cannot_load_its_model_fails_the_measure_with_the_cause():
    with pytest.raises(RuntimeError, match="UnknownModel: no model text.toxic=no-such-version"):
        limit.measure(2, ["text"], {"text.toxic": "no-such-version"}, {}, 1.0)
