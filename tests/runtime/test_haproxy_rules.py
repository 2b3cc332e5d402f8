"""Our rules in Ray's HAProxy config (runtime/haproxy_rules.py): the config edit, and the real bundled HAProxy
started through the launcher, as Ray starts it, in front of a real HTTP server on loopback.

Each loopback address (127.0.0.1, .2, .3) is a client address of its own to HAProxy, so one test has an attacker
and a bystander. IPv6 clients beyond ::1 come through the PROXY protocol, which sets the address HAProxy's rules see
(`src`) as a connection from it would. The server answers as the ingress replica would (404 on a path no route has,
401 for a wrong key on one that checks it), and as Serve does around it (plain-text 503)."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from runtime.haproxy import verified_binary, write_launcher, write_proxy_secret
from runtime.haproxy_rules import (
    KEYED_ROUTES,
    MARKER,
    SourceLimits,
    config_path,
    frontend_rules,
    with_our_rules,
)
from serve_app.app import create_app
from serve_app.client_address import CLIENT_ADDRESS_HEADER, PROXY_SECRET_HEADER, ClientAddresses
from serve_app.services import Services

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
    bind {bind}
    acl healthcheck path -i /-/healthz
    default_backend app
backend app
    server s1 127.0.0.1:{backend_port}
"""


# A well-formed API key (store/keys/config.py: `mod_` and 43 URL-safe characters), the one the test's server accepts.
GOOD_KEY = "mod_" + "Gg-_" * 10 + "abc"
GOOD = f"Bearer {GOOD_KEY}"
# A route of the app that checks a key (runtime/haproxy_rules.py KEYED_ROUTES: GET /v1/review/{item_id}).
KEYED_PATH = "/v1/review/rev_1"
SECRET = "ab" * 32


def _made_up_key(n: int) -> dict:
    return {"Authorization": f"Bearer {GOOD_KEY[:-3]}{n:03d}"}


def _ray_like_config(tmp_path: Path, port: int, backend_port: int, bind: str = "") -> str:
    ray_500 = tmp_path / "500.http"
    ray_500.write_text("HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nContent-Length: 21\r\n\r\n"
                       "Internal Server Error")  # fmt: skip
    return RAY_LIKE_CONFIG.format(bind=bind or f"127.0.0.1:{port}", backend_port=backend_port, ray_500=ray_500)


def test_the_rules_go_right_after_the_frontends_bind_and_only_once(tmp_path):
    config = _ray_like_config(tmp_path, 1, 2)
    limits = SourceLimits(unkeyed=7, refused_keys=3)
    patched = with_our_rules(config, limits, tmp_path / "ours.http", SECRET)
    lines, ours = patched.splitlines(), frontend_rules(limits, SECRET)
    bind = lines.index("    bind 127.0.0.1:1")
    assert lines[bind + 1] == f"    {MARKER}"
    assert lines[bind + 1 : bind + 1 + len(ours)] == [f"    {rule}" for rule in ours]
    assert lines[bind + len(ours) + 1] == "    acl healthcheck path -i /-/healthz"
    assert "sc_gpc_rate(0,0) gt 7" in patched and "sc_gpc_rate(1,0) gt 3" in patched
    # HAProxy's own errors come from our file, not Ray's plain-text 500.
    assert [line for line in lines if "errorfile" in line] == [f"    errorfile {s} {tmp_path / 'ours.http'}" for s in (502, 503, 504)]
    assert with_our_rules(patched, limits, tmp_path / "ours.http", SECRET) == patched  # Ray may reuse a file


def test_a_limit_of_zero_is_off_and_the_error_answers_stay():
    rules = "\n".join(frontend_rules(SourceLimits(unkeyed=0, refused_keys=0), SECRET))
    assert "track-sc0" not in rules and "http-response return status 503" in rules
    only_refused = "\n".join(frontend_rules(SourceLimits(unkeyed=0, refused_keys=5), SECRET))
    assert "sc-inc-gpc(0,0)" not in only_refused and "sc_gpc_rate(1,0) gt 5" in only_refused


def test_a_config_without_rays_frontend_is_refused_not_started_without_the_rules(tmp_path):
    with pytest.raises(ValueError, match="http_frontend"):
        with_our_rules("global\ndefaults\n    mode http\n", SourceLimits(), tmp_path / "ours.http", SECRET)


@pytest.mark.parametrize("secret", ["", "ab" * 31, "AB" * 32, "ab" * 31 + "a\n", "ab" * 31 + "a%"])
def test_a_proxy_secret_that_is_not_64_hex_characters_never_reaches_the_config(secret):
    # The secret is written into HAProxy's config: a short one is guessable, anything else could be a rule of its own.
    with pytest.raises(ValueError, match="64 hex"):
        frontend_rules(SourceLimits(), secret)


def _app_routes(routes) -> set[tuple[str, str]]:
    """(method, path) of every route of the app, through the routers it includes."""
    found = set()
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            found |= _app_routes(included.routes)
        else:
            found |= {(method, route.path) for method in getattr(route, "methods", None) or {"GET"}}
    return found


# The routes that check no key, with why: they count as unkeyed, whatever a request carries.
KEY_FREE_ROUTES = {
    ("GET", "/healthz"), ("GET", "/$discovery/rest"),  # health; Perspective's discovery document
    ("GET", "/docs"), ("GET", "/docs-assets"), ("GET", "/openapi.json"), ("HEAD", "/openapi.json"),  # the docs
    ("GET", "/v1/widget.js"), ("OPTIONS", "/v1/widget/check-text"), ("OPTIONS", "/v1/widget/check-image"),  # widget
    # Perspective's browser clients' preflights
    ("OPTIONS", "/v1alpha1/comments:analyze"), ("OPTIONS", "/v1alpha1/comments:suggestscore"),
    ("OPTIONS", "/comments:analyze"), ("OPTIONS", "/comments:suggestscore"),
}


def test_the_keyed_routes_are_exactly_the_apps_routes_that_check_a_key():
    """A route added to the app without a place here fails: a keyed one left out would count a busy backend's
    requests as unkeyed, a key-free one put in would let a flood of made-up keys through uncounted."""
    app = create_app(Services(config=None, quota=None, reviews=None, backends=None, flow=None))
    keyed = {(method, path) for method, paths in KEYED_ROUTES.items() for path in paths}
    assert ("POST", "/v1/moderate-text") in _app_routes(app.routes)  # the walk reaches the included routers
    assert _app_routes(app.routes) == keyed | KEY_FREE_ROUTES and not keyed & KEY_FREE_ROUTES


def test_the_config_is_haproxys_dash_f_argument():
    assert str(config_path(["-db", "-f", "/run/x.cfg", "-sf", "12"])) == "/run/x.cfg"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class _App(BaseHTTPRequestHandler):
    """As the ingress answers: on a route that checks a key (GET /v1/review/..., POST /v1/widget/check-text), 401 for
    a key that is not GOOD_KEY and 200 for it; on a path that checks none (/healthz, the paths below), 200 whatever
    the request carries; on any other path or method, 404 without looking at a key. `/serve-503` as Serve answers
    for a full replica (plain text), `/app-503` as our app does (JSON); `/client-address` echoes the address and
    secret headers it got and the address the ingress would believe (serve_app/client_address.py)."""

    def do_GET(self):
        path, _, query = self.path.partition("?")
        keyed_route = (self.command == "GET" and path.startswith("/v1/review/")) or (
            self.command == "POST" and path == "/v1/widget/check-text")  # fmt: skip
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        right_key = (scheme.lower() == "bearer" and token.strip() == GOOD_KEY) or query == f"key={GOOD_KEY}"
        status, kind, body = 200, "application/json", b"{}"
        if keyed_route:
            status = 200 if right_key else 401
        elif path == "/serve-503":
            status, kind, body = 503, "text/plain", b"Request dropped due to backpressure"
        elif path == "/app-503":
            status, body = 503, b'{"error": {"code": "store_unavailable", "message": "x"}}'
        elif path == "/serve-500":
            status, kind, body = 500, "text/plain", b"Internal Server Error"
        elif path == "/client-address":
            believed = ClientAddresses(self.server.proxy_secret).address(self.headers, self.client_address[0])
            body = json.dumps({"addresses": self.headers.get_all(CLIENT_ADDRESS_HEADER) or [],
                               "secrets": self.headers.get_all(PROXY_SECRET_HEADER) or [],
                               "believed": believed}).encode()  # fmt: skip
        elif path != "/healthz":
            status, body = 404, b'{"error": {"code": "not_found", "message": "x"}}'
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_OPTIONS = do_GET

    def log_message(self, *args):
        pass


@contextmanager
def _haproxy_in_front_of_the_app(
    tmp_path: Path, host: str = "127.0.0.1", bind_options: str = ""
) -> Iterator[tuple[str, Path, ThreadingHTTPServer]]:
    """The bundled HAProxy, started through the launcher with limits of 5 unkeyed requests and 3 refused keys and a
    secret of its own, on a free port of `host`."""
    app = ThreadingHTTPServer(("127.0.0.1", 0), _App)
    threading.Thread(target=app.serve_forever, daemon=True).start()
    port = _free_port()
    config = tmp_path / "haproxy.cfg"
    config.write_text(_ray_like_config(tmp_path, port, app.server_address[1], f"{host}:{port} {bind_options}"))
    secret_file = write_proxy_secret(tmp_path)
    app.proxy_secret = secret_file.read_text()
    launcher = write_launcher(tmp_path, verified_binary(), SourceLimits(unkeyed=5, refused_keys=3), secret_file)
    haproxy = subprocess.Popen([str(launcher), "-db", "-f", str(config)], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((host, port), timeout=1).close()
                break
            except OSError:
                assert haproxy.poll() is None, "HAProxy exited at start"
                assert time.monotonic() < deadline, "HAProxy did not listen within 10 s"
                time.sleep(0.05)
        yield f"http://{f'[{host}]' if ':' in host else host}:{port}", config, app
    finally:
        haproxy.terminate()
        haproxy.wait(timeout=10)
        app.shutdown()
        app.server_close()


@pytest.fixture
def limited_haproxy(tmp_path):
    with _haproxy_in_front_of_the_app(tmp_path) as running:
        yield running


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
        assert attacker.get(f"{base_url}{KEYED_PATH}", headers={"Authorization": GOOD}).status_code == 200
        assert bystander.get(f"{base_url}/healthz").status_code == 200


def test_an_address_whose_keys_are_refused_is_paused_keys_and_all(limited_haproxy):
    base_url, _, _ = limited_haproxy
    with _client("127.0.0.3") as guesser, _client("127.0.0.1") as bystander:
        wrong = [guesser.get(f"{base_url}{KEYED_PATH}", headers={"Authorization": f"Bearer {GOOD_KEY[:-2]}{n:02d}"})
                 .status_code for n in range(6)]  # fmt: skip
        assert wrong == [401] * 4 + [429] * 2  # the fourth 401 takes the rate past 3
        assert guesser.get(f"{base_url}{KEYED_PATH}", headers={"Authorization": GOOD}).status_code == 429
        assert bystander.get(f"{base_url}{KEYED_PATH}", headers={"Authorization": GOOD}).status_code == 200


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
        answer = client.get(f"{base_url}{KEYED_PATH}", headers={"Authorization": GOOD})
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
        statuses = [backend.get(f"{base_url}{KEYED_PATH}", headers=headers[n % 2]).status_code for n in range(20)]
        statuses += [backend.get(f"{base_url}{KEYED_PATH}", params={"key": GOOD_KEY}).status_code for _ in range(10)]
        assert statuses == [200] * 30


def test_a_pages_widget_checks_with_a_well_formed_token_are_not_counted_as_keyless(limited_haproxy):
    # The stub answers 200 only for GOOD_KEY: a widget token gets its 401 there, so stay under the refused count
    # (3) with two, then show that the keyless limit (5) never took them: a keyless call still gets its full share.
    base_url, _, _ = limited_haproxy
    with _client("127.0.0.6") as visitors:
        token = {"Authorization": "Bearer wt_" + "Ab-_" * 10 + "xyz"}
        assert [visitors.post(f"{base_url}/v1/widget/check-text", headers=token).status_code for _ in range(2)] == [401] * 2
        assert [visitors.get(f"{base_url}/healthz").status_code for _ in range(7)] == [200] * 5 + [429] * 2


def test_the_ingress_believes_the_address_haproxy_sends_and_never_one_a_client_chose(limited_haproxy):
    """The widget's per-address limit (serve_app/routes_widget.py) counts the address HAProxy sends beside its
    secret; a client that reaches the ingress's own port, bypassing HAProxy, is counted by its own."""
    base_url, _, app = limited_haproxy
    forged = {CLIENT_ADDRESS_HEADER: "203.0.113.9", PROXY_SECRET_HEADER: "cd" * 32}
    with _client("127.0.0.4") as client:
        through_haproxy = client.get(f"{base_url}/client-address", headers=forged).json()
        direct = client.get(f"http://127.0.0.1:{app.server_address[1]}/client-address", headers=forged).json()
    assert through_haproxy == {"addresses": ["127.0.0.4"], "secrets": [app.proxy_secret], "believed": "127.0.0.4"}
    assert direct["addresses"] == ["203.0.113.9"] and direct["believed"] == "127.0.0.4"


@pytest.mark.parametrize(
    "method, path",
    [("GET", "/v1/no-such-route"), ("POST", "/v1/no-such-route"),  # a 404: no route at all
     ("GET", "/v1/moderate-text"), ("POST", KEYED_PATH),  # a 405: the route is another method's
     ("GET", "/v1/widget.js"), ("OPTIONS", "/v1/widget/check-text")],  # a route that checks no key
)  # fmt: skip
def test_made_up_keys_where_no_route_checks_them_are_counted_as_unkeyed(limited_haproxy, method, path):
    """No 401 ever answers these, so the refused-keys count would never see a flood of made-up keys there."""
    base_url, _, _ = limited_haproxy
    with _client("127.0.0.7") as flooder:
        statuses = [flooder.request(method, f"{base_url}{path}", headers=_made_up_key(n)).status_code for n in range(7)]
        assert statuses == [404] * 5 + [429] * 2  # the test's server answers 404 wherever no route checks a key
        assert flooder.get(f"{base_url}{KEYED_PATH}", headers={"Authorization": GOOD}).status_code == 200


def _via_proxy_protocol(port: int, source: str, path: str = "/healthz") -> tuple[int, bytes]:
    """A GET on a connection of its own whose client HAProxy takes to be `source` (PROXY protocol v1)."""
    family, destination = ("TCP6", "::1") if ":" in source else ("TCP4", "127.0.0.1")
    request = f"PROXY {family} {source} {destination} 40000 80\r\nGET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        connection.sendall(request.encode())
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_an_ipv6_client_is_counted_by_its_64_and_an_ipv4_mapped_one_by_its_ipv4_address(tmp_path):
    """One host holds a whole /64: per address it would get a fresh share of unkeyed requests per address it picks.
    An IPv4 client that a dual-stack listener sees as `::ffff:a.b.c.d` is still one client per IPv4 address."""
    with _haproxy_in_front_of_the_app(tmp_path, bind_options="accept-proxy") as (base_url, _, _):
        port = int(base_url.rsplit(":", 1)[1])
        one_host = [_via_proxy_protocol(port, f"2001:db8:1:2::{n:x}")[0] for n in range(1, 8)]
        assert one_host == [200] * 5 + [429] * 2
        assert _via_proxy_protocol(port, "2001:db8:1:3::1")[0] == 200  # the next /64: another client
        assert [_via_proxy_protocol(port, f"::ffff:192.0.2.{n}")[0] for n in range(1, 8)] == [200] * 7
        mapped_then_plain = [_via_proxy_protocol(port, "::ffff:192.0.2.9")[0] for _ in range(5)]
        assert mapped_then_plain + [_via_proxy_protocol(port, "192.0.2.9")[0]] == [200] * 5 + [429]
        _, seen = _via_proxy_protocol(port, "2001:db8:1:4::77", "/client-address")
        assert json.loads(seen)["believed"] == "2001:db8:1:4::77"  # whole: the ingress counts it by /64 itself


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="IPv6 loopback (::1) cannot be bound on this machine")
def test_a_client_on_ipv6_loopback_is_counted_and_its_address_passed_on(tmp_path):
    with _haproxy_in_front_of_the_app(tmp_path, host="::1", bind_options="v6only") as (base_url, _, _):
        with httpx.Client(timeout=5) as client:
            assert client.get(f"{base_url}/client-address").json()["believed"] == "::1"
            assert [client.get(f"{base_url}/healthz").status_code for _ in range(6)] == [200] * 4 + [429] * 2
