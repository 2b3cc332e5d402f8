"""Who decides: the ingress itself by default, the Policy deployment with MODERATION_POLICY_HOP; the same decisions."""

from __future__ import annotations

import pytest
import yaml

from deployments import builder
from deployments.handles import ServeBackends
from policy.decisions import decide
from policy.types import Profile
from runtime.settings import PROJECT_ROOT, Settings
from tests.deployments.test_builder import ingress_arguments

ITEMS = [({"toxic": 0.97}, "text"), ({"toxic": 0.01}, "text")]


def shipped_default_profile() -> Profile:
    return Profile(name="default", **yaml.safe_load((PROJECT_ROOT / "config" / "profiles.yaml").read_text())["default"])


class Method:
    """A handle's method (`handle.decide_many.remote(...)`) that answers at once and counts its calls."""

    def __init__(self, answer):
        self.answer, self.calls = answer, []

    def remote(self, *args):
        self.calls.append(args)

        async def answered():
            return self.answer(*args)

        return answered()


class PolicyHandle:
    def __init__(self):
        self.decide_many = Method(lambda items, profile, threshold: [decide(s, profile, k, threshold) for s, k in items])


class ModelHandle:
    def options(self, **_):
        return self


@pytest.mark.anyio
@pytest.mark.parametrize("hop", [False, True])
async def test_the_ingress_and_the_policy_deployment_decide_alike(hop):
    policy, profile = PolicyHandle(), shipped_default_profile()
    backends = ServeBackends(ModelHandle(), ModelHandle(), policy, policy_hop=hop)
    decisions = await backends.decide_many(ITEMS, profile, None)
    assert [d.decision for d in decisions] == ["block", "allow"]
    assert decisions == [decide(scores, profile, kind, None) for scores, kind in ITEMS]
    assert len(policy.decide_many.calls) == (1 if hop else 0)


def test_the_policy_hop_setting_reaches_the_ingress(monkeypatch):
    for value, expected in (("1", True), (None, False)):
        if value is None:
            monkeypatch.delenv("MODERATION_POLICY_HOP", raising=False)
        else:
            monkeypatch.setenv("MODERATION_POLICY_HOP", value)
        settings = Settings()
        monkeypatch.setattr(builder, "get_settings", lambda: settings)
        assert ingress_arguments({})["policy_hop"] is expected
