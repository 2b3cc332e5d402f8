"""Settings come from the environment, read once into one typed object."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from runtime.settings import Settings
from serve_app.deadlines import TimeLimits


def environment_names() -> list[str]:
    names = []
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        names.append(alias if isinstance(alias, str) else f"MODERATION_{name.upper()}")
    return names


def test_settings_are_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("MODERATION_PORT", "9123")
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:7000/0")
    monkeypatch.setenv("MODERATION_INFERENCE_TIMEOUT_S", "2.5")
    settings = Settings()
    assert (settings.port, settings.redis_url, settings.inference_timeout_s) == (9123, "redis://127.0.0.1:7000/0", 2.5)


def test_defaults_are_loopback_port_8000_and_no_admin_api(monkeypatch):
    for name in environment_names():
        monkeypatch.delenv(name, raising=False)
    settings = Settings()
    assert (settings.host, settings.port, settings.admin_token, settings.redis_url) == ("127.0.0.1", 8000, None, None)


def test_an_admin_token_under_32_characters_is_refused_at_start(monkeypatch):
    monkeypatch.setenv("MODERATION_ADMIN_TOKEN", "x" * 31)
    with pytest.raises(ValidationError, match="32"):
        Settings()
    monkeypatch.setenv("MODERATION_ADMIN_TOKEN", "x" * 32)
    assert Settings().admin_token == "x" * 32


def test_the_admin_api_listens_on_loopback_by_default(monkeypatch):
    for name in environment_names():
        monkeypatch.delenv(name, raising=False)
    settings = Settings()
    assert (settings.admin_host, settings.admin_port) == ("127.0.0.1", 8001)


def test_the_store_rules_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("MODERATION_REPORT_COUNTER_DAYS", "2")
    monkeypatch.setenv("MODERATION_REPORTS_PER_DAY", "50")
    monkeypatch.setenv("MODERATION_ESCALATIONS_PER_DAY", "5")
    monkeypatch.setenv("MODERATION_REVIEW_RETENTION_DAYS", "0.5")
    monkeypatch.setenv("MODERATION_STORE_MAXMEMORY_MB", "128")
    monkeypatch.setenv("MODERATION_REVIEW_PENDING_DAYS", "3")
    monkeypatch.setenv("MODERATION_REVIEW_PENDING_PER_ACCOUNT", "7")
    monkeypatch.setenv("MODERATION_STORE_MEMORY_ALERT_RATIO", "0.9")
    monkeypatch.setenv("MODERATION_HEALTH_INTERVAL_S", "5")
    monkeypatch.setenv("MODERATION_REPORT_COUNTERS_PER_ACCOUNT", "11")
    monkeypatch.setenv("MODERATION_HASH_BANK_MAX_PER_ACCOUNT", "13")
    settings = Settings()
    rules = settings.review_rules()
    assert (rules.pending_retention_s, rules.pending_per_account) == (3 * 86400, 7)
    assert (rules.report_counters_per_account, rules.hash_bank_max_entries) == (11, 13)
    health = settings.health_rules()
    assert (health.interval_s, health.memory_limit_bytes, health.memory_alert_ratio) == (5, 128 * 1024 * 1024, 0.9)
    assert (rules.report_counter_ttl_s, rules.reports_per_account_per_day) == (2 * 86400, 50)
    assert (rules.escalations_per_account_per_day, rules.decided_retention_s) == (5, 43200)
    assert settings.store_maxmemory_mb == 128


def test_the_store_defaults(monkeypatch):
    for name in ("REPORT_COUNTER_DAYS", "REPORTS_PER_DAY", "ESCALATIONS_PER_DAY", "REVIEW_RETENTION_DAYS",
                 "STORE_MAXMEMORY_MB", "REVIEW_PENDING_DAYS", "REVIEW_PENDING_PER_ACCOUNT", "STORE_MEMORY_ALERT_RATIO",
                 "HEALTH_INTERVAL_S", "REPORT_COUNTERS_PER_ACCOUNT", "HASH_BANK_MAX_PER_ACCOUNT"):
        monkeypatch.delenv(f"MODERATION_{name}", raising=False)
    rules, settings = Settings().review_rules(), Settings()
    assert (rules.report_counters_per_account, rules.hash_bank_max_entries) == (50_000, 100_000)
    assert (rules.report_counter_ttl_s, rules.decided_retention_s) == (30 * 86400, 30 * 86400)
    assert (rules.reports_per_account_per_day, rules.escalations_per_account_per_day) == (10_000, 1_000)
    assert settings.store_maxmemory_mb == 512
    assert (rules.pending_retention_s, rules.pending_per_account) == (30 * 86400, 10_000)
    health = settings.health_rules()
    assert (health.interval_s, health.memory_limit_bytes, health.memory_alert_ratio) == (2, 512 * 1024 * 1024, 0.8)


@pytest.mark.parametrize("name,value", [("REVIEW_RETENTION_DAYS", "0"), ("REPORTS_PER_DAY", "-1"),
                                        ("STORE_MAXMEMORY_MB", "1"), ("REVIEW_PENDING_PER_ACCOUNT", "-1"),
                                        ("REVIEW_PENDING_DAYS", "0"), ("STORE_MEMORY_ALERT_RATIO", "0"),
                                        ("HEALTH_INTERVAL_S", "0"), ("REPORT_COUNTERS_PER_ACCOUNT", "0"),
                                        ("HASH_BANK_MAX_PER_ACCOUNT", "-1")])
def test_nonsense_store_settings_are_refused_at_start(monkeypatch, name, value):
    monkeypatch.setenv(f"MODERATION_{name}", value)
    with pytest.raises(ValidationError):
        Settings()


def test_haproxy_is_on_by_default_with_ports_chosen_at_start(monkeypatch):
    for name in environment_names():
        monkeypatch.delenv(name, raising=False)
    settings = Settings()
    assert (settings.haproxy, settings.haproxy_stats_port, settings.haproxy_metrics_port) == (True, None, None)
    monkeypatch.setenv("MODERATION_HAPROXY", "0")
    monkeypatch.setenv("MODERATION_HAPROXY_STATS_PORT", "18404")
    assert (Settings().haproxy, Settings().haproxy_stats_port) == (False, 18404)
    monkeypatch.setenv("MODERATION_HAPROXY_METRICS_PORT", "70000")
    with pytest.raises(ValidationError):
        Settings()


def test_the_time_limits_default_to_the_ingress_defaults_and_come_from_the_environment(monkeypatch):
    for name in environment_names():
        monkeypatch.delenv(name, raising=False)
    assert Settings().time_limits() == TimeLimits()
    monkeypatch.setenv("MODERATION_BODY_IDLE_TIMEOUT_S", "1.5")
    monkeypatch.setenv("MODERATION_BODY_TIMEOUT_S", "7")
    monkeypatch.setenv("MODERATION_REQUEST_TIMEOUT_S", "20")
    monkeypatch.setenv("MODERATION_MAX_BODIES_IN_PROGRESS_PER_ACCOUNT", "4")
    monkeypatch.setenv("MODERATION_PERSPECTIVE_ANSWER_S", "0.45")
    assert Settings().time_limits() == TimeLimits(
        body_idle_timeout_s=1.5, body_timeout_s=7, request_timeout_s=20, max_bodies_in_progress_per_account=4,
        perspective_answer_s=0.45,
    )
