"""Our rules in Ray's HAProxy config (runtime/haproxy_rules.py): the config edit, and the real bundled HAProxy
started through the launcher, as Ray starts it, in front of a real HTTP server on loopback.

Each loopback address (127.0.0.1, .2, .3) is a client address of its own to HAProxy, so one test has an attacker
and a bystander. The server answers as the ingress replica would, and as Serve does around it (plain-text 503)."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from runtime.haproxy import verified_binary, write_launcher
from runtime.haproxy_rules import CLIENT_ADDRESS_HEADER, MARKER, SourceLimits, config_path, frontend_rules, with_our_rules

# The shape of Ray 2.60's template: its errorfiles turn HAProxy's own errors into a plain-text 500.
RAY_LIKE_CONFIG = """global
    maxconn 100
defaults
    mode http
    errorfile 502 {ray_500}
    errorfile 503 {ray_500}
    errorfile 504 {ray_500}
    timeout connect 5s
    timeout client 5s
    timeout server 5s
frontend http_frontend
    bind 127.0.0.1:{port}
    acl healthcheck path -i /-/healthz
    default_backend app
backend app
    server s1 127.0.0.1:{backend_port}
"""


# A well-formed API key (store/keys/config.py: `mod_` and 43 URL-safe characters), the one the test's server accepts.
GOOD_KEY = "mod_" + "Gg-_" * 10 + "abc"
GOOD = f"Bearer {GOOD_KEY}"


def _ray_like_config(tmp_path: Path, port: int, backend_port: int) -> str:
    ray_500 = tmp_path / "500.http"
    ray_500.write_text("HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nContent-Length: 21\r\n\r\n"
                       "Internal Server Error")  # fmt: skip
    return RAY_LIKE_CONFIG.format(port=port, backend_port=backend_port, ray_500=ray_500)


def test_the_rules_go_right_after_the_frontends_bind_and_only_once(tmp_path):
    config = _ray_like_config(tmp_path, 1, 2)
    limits = SourceLimits(unkeyed=7, refused_keys=3)
    patched = with_our_rules(config, limits, tmp_path / "ours.http")
    lines = patched.splitlines()
    bind = lines.index("    bind 127.0.0.1:1")
    assert lines[bind + 1] == f"    {MARKER}"
    assert lines[bind + 1 : bind + 1 + len(frontend_rules(limits))] == [f"    {rule}" for rule in frontend_rules(limits)]
    assert lines[bind + len(frontend_rules(limits)) + 1] == "    acl healthcheck path -i /-/healthz"
    assert "sc_gpc_rate(0,0) gt 7" in patched and "sc_gpc_rate(1,0) gt 3" in patched
    # HAProxy's own errors come from our file, not Ray's plain-text 500.
    assert [line for line in lines if "errorfile" in line] == [f"    errorfile {s} {tmp_path / 'ours.http'}" for s in (502, 503, 504)]
    assert with_our_rules(patched, limits, tmp_path / "ours.http") == patched  # Ray may reuse a file


def test_a_limit_of_zero_is_off_and_the_error_answers_stay():
    rules = "\n".join(frontend_rules(SourceLimits(unkeyed=0, refused_keys=0)))
    assert "track-sc0" not in rules and "http-response return status 503" in rules
    only_refused = "\n".join(frontend_rules(SourceLimits(unkeyed=0, refused_keys=5)))
    assert "sc-inc-gpc(0,0)" not in only_refused and "sc_gpc_rate(1,0) gt 5" in only_refused


def test_a_config_without_rays_frontend_is_refused_not_started_without_the_rules(tmp_path):
    with pytest.raises(ValueError, match="http_frontend"):
        with_our_rules("global\ndefaults\n    mode http\n", SourceLimits(), tmp_path / "ours.http")


def test_the_config_is_haproxys_dash_f_argument():
    assert str(config_path(["-db", "-f", "/run/x.cfg", "-sf", "12"])) == "/run/x.cfg"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class _App(BaseHTTPRequestHandler):
    """401 for a key that is not GOOD_KEY, 200 otherwise (what the ingress would answer); `/serve-503` as Serve
    answers for a full replica (plain text), `/app-503` as our app does (JSON); `/client-address` echoes the client
    address headers it got."""

    def do_GET(self):
        keyed = self.headers.get("Authorization")
        scheme, _, token = (keyed or "").partition(" ")
        status, kind, body = 200, "application/json", b"{}"
        # /healthz needs no key, as the ingress's: whatever the header says, it answers 200.
        if keyed and self.path != "/healthz" and not (scheme.lower() == "bearer" and token.strip() == GOOD_KEY):
            status = 401
        elif self.path == "/serve-503":
            status, kind, body = 503, "text/plain", b"Request dropped due to backpressure"
        elif self.path == "/app-503":
            status, body = 503, b'{"error": {"code": "store_unavailable", "message": "x"}}'
        elif self.path == "/serve-500":
            status, kind, body = 500, "text/plain", b"Internal Server Error"
        elif self.path == "/client-address":
            body = json.dumps(self.headers.get_all(CLIENT_ADDRESS_HEADER) or []).encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def limited_haproxy(tmp_path):
    """The bundled HAProxy, started through the launcher with limits of 5 keyless requests and 3 refused keys."""
    app = ThreadingHTTPServer(("127.0.0.1", 0), _App)
    threading.Thread(target=app.serve_forever, daemon=True).start()
    port = _free_port()
    config = tmp_path / "haproxy.cfg"
    config.write_text(_ray_like_config(tmp_path, port, app.server_address[1]))
    launcher = write_launcher(tmp_path, verified_binary(), SourceLimits(unkeyed=5, refused_keys=3))
    haproxy = subprocess.Popen([str(launcher), "-db", "-f", str(config)], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "HAProxy did not listen within 10 s"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", config, app
    finally:
        haproxy.terminate()
        haproxy.wait(timeout=10)
        app.shutdown()
        app.server_close()


def _client(address: str) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=5)


def test_the_launcher_adds_the_rules_and_runs_the_verified_binary(limited_haproxy):
    base_url, config, _ = limited_haproxy
    assert MARKER in config.read_text()
    with _client("127.0.0.1") as client:
        assert client.get(f"{base_url}/healthz").status_code == 200


def test_keyless_requests_past_the_limit_get_a_429_from_that_address_only(limited_haproxy):
    base_url, _, _ = limited_haproxy
    with _client("127.0.0.2") as attacker, _client("127.0.0.1") as bystander:
        statuses = [attacker.get(f"{base_url}/healthz").status_code for _ in range(8)]
        refused = attacker.get(f"{base_url}/healthz")
        assert statuses == [200] * 5 + [429] * 3
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "10"
        assert refused.headers["X-Request-ID"] and refused.headers["Content-Type"] == "application/json"
        assert json.loads(refused.text)["error"]["code"] == "rate_limited"
        # The same address with a key, and another address without one, are not counted against it.
        assert attacker.get(f"{base_url}/v1/x", headers={"Authorization": GOOD}).status_code == 200
        assert bystander.get(f"{base_url}/healthz").status_code == 200


def test_an_address_whose_keys_are_refused_is_paused_keys_and_all(limited_haproxy):
    base_url, _, _ = limited_haproxy
    with _client("127.0.0.3") as guesser, _client("127.0.0.1") as bystander:
        wrong = [guesser.get(f"{base_url}/v1/x", headers={"Authorization": f"Bearer {GOOD_KEY[:-2]}{n:02d}"})
                 .status_code for n in range(6)]  # fmt: skip
        assert wrong == [401] * 4 + [429] * 2  # the fourth 401 takes the rate past 3
        assert guesser.get(f"{base_url}/v1/x", headers={"Authorization": GOOD}).status_code == 429
        assert bystander.get(f"{base_url}/v1/x", headers={"Authorization": GOOD}).status_code == 200


def test_serves_plain_text_answers_become_our_error_shape_and_our_own_json_is_kept(limited_haproxy):
    base_url, _, _ = limited_haproxy
    with _client("127.0.0.1") as client:
        serve = client.get(f"{base_url}/serve-503", headers={"Authorization": GOOD})
        assert serve.status_code == 503 and serve.headers["Retry-After"] == "1" and serve.headers["X-Request-ID"]
        assert serve.json()["error"]["code"] == "overloaded"
        ours = client.get(f"{base_url}/app-503", headers={"Authorization": GOOD})
        assert ours.status_code == 503 and ours.json()["error"]["code"] == "store_unavailable"
        crash = client.get(f"{base_url}/serve-500", headers={"Authorization": GOOD})
        assert crash.status_code == 500 and crash.json()["error"]["code"] == "internal_error"


def test_with_no_ingress_up_haproxy_answers_503_ingress_unavailable_not_rays_500(limited_haproxy):
    base_url, _, app = limited_haproxy
    app.shutdown()
    app.server_close()  # the backend's port now refuses connections, as while Serve restarts the ingress replica
    with _client("127.0.0.1") as client:
        answer = client.get(f"{base_url}/v1/x", headers={"Authorization": GOOD})
    assert answer.status_code == 503 and answer.headers["Retry-After"] == "1" and answer.headers["X-Request-ID"]
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.json()["error"]["code"] == "ingress_unavailable"


@pytest.mark.parametrize(
    "junk",
    [{"headers": {"Authorization": "x"}}, {"headers": {"Authorization": "Basic abc"}},
     {"headers": {"Authorization": "Bearer nope"}}, {"headers": {"Authorization": f"Bearer {GOOD_KEY}x"}},
     {"headers": {"Authorization": f"Token {GOOD_KEY}"}}, {"params": {"key": "x"}},
     {"params": {"key": GOOD_KEY[:-1]}},
     {"headers": {"Authorization": GOOD}}],  # well-formed, but /healthz never checks it: keyless all the same
)  # fmt: skip
def test_a_junk_authorization_header_or_key_parameter_is_counted_as_keyless(limited_haproxy, junk):
    base_url, _, _ = limited_haproxy
    with _client("127.0.0.2") as flooder:
        statuses = [flooder.get(f"{base_url}/healthz", **junk).status_code for _ in range(7)]
        assert statuses == [200] * 5 + [429] * 2


def test_a_backend_sending_well_formed_keys_from_one_address_is_never_counted(limited_haproxy):
    base_url, _, _ = limited_haproxy
    with _client("127.0.0.2") as backend:
        headers = [{"Authorization": GOOD}, {"Authorization": f"bearer  {GOOD_KEY}"}]
        statuses = [backend.get(f"{base_url}/v1/x", headers=headers[n % 2]).status_code for n in range(20)]
        statuses += [backend.get(f"{base_url}/v1/x", params={"key": GOOD_KEY}).status_code for _ in range(10)]
        assert statuses == [200] * 30


def test_a_pages_widget_checks_with_a_well_formed_token_are_not_counted_as_keyless(limited_haproxy):
    # The stub answers 200 only for GOOD_KEY: a widget token gets its 401 there, so stay under the refused count
    # (3) with two, then show that the keyless limit (5) never took them: a keyless call still gets its full share.
    base_url, _, _ = limited_haproxy
    with _client("127.0.0.6") as visitors:
        token = {"Authorization": "Bearer wt_" + "Ab-_" * 10 + "xyz"}
        assert [visitors.get(f"{base_url}/v1/widget/check-text", headers=token).status_code for _ in range(2)] == [401] * 2
        assert [visitors.get(f"{base_url}/healthz").status_code for _ in range(7)] == [200] * 5 + [429] * 2


def test_the_ingress_learns_the_clients_address_and_never_one_the_client_chose(limited_haproxy):
    """The widget's per-address limit (serve_app/routes_widget.py) counts this header behind HAProxy."""
    base_url, _, _ = limited_haproxy
    with _client("127.0.0.4") as client:
        forged = {"Authorization": GOOD, CLIENT_ADDRESS_HEADER: "203.0.113.9"}
        assert client.get(f"{base_url}/client-address", headers=forged).json() == ["127.0.0.4"]
