"""training/served_cascade.py: the scripts that measure "as served" read the routing serve_config.yaml serves."""

from __future__ import annotations

import pytest

from training.served_cascade import served_first_stage, served_share, served_text_version

CONFIG = """
applications:
  - name: moderation
    deployments:
      - name: Ingress
      - name: TextModel
        user_config:
          models:
            text.toxic: {version}
"""


def test_the_served_version_is_read_from_the_config():
    assert served_text_version(CONFIG.format(version="usem3-x-c100dr0123abcdgbfeed")) == "usem3-x-c100dr0123abcdgbfeed"


def test_a_config_naming_the_text_model_twice_or_never_is_refused():
    twice = CONFIG.format(version="a") + "      - name: Other\n        user_config:\n          models:\n            text.toxic: b\n"
    with pytest.raises(ValueError, match="2 times"):
        served_text_version(twice)
    with pytest.raises(ValueError, match="0 times"):
        served_text_version("applications:\n  - name: m\n    deployments:\n      - name: Ingress\n")


@pytest.mark.parametrize("version, share", [
    ("usem3-x-sh1-c100dr0123abcdgbfeed", 1.0),
    ("usem3-x-sh1-c70gbfeed", 0.7),
    ("usem3-x-sh1-cl38f58db5dr0123abcdgbfeed", None),
    ("usem3-x-sh1-cl38f58db5gbfeed", None),
    ("usem3-x-sh1", None),
])
def test_the_one_share_of_a_version(version, share):
    assert served_share(version) == share


def test_the_served_first_stage_is_the_one_serve_config_names():
    stage = served_first_stage()
    assert stage.model_version == served_text_version()
