"""Settings come from the environment, read once into one typed object."""

from __future__ import annotations

from runtime.settings import Settings


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
