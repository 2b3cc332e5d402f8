"""The sender over TLS, against a real TLS receiver on 127.0.0.1 whose certificates a CA made here signs: names that
only the test's resolver knows reach the checked address, each certificate is verified against the URL's host (SNI),
and two hosts on one address never share a kept-alive connection, so none is carried on a connection that was
verified for another name."""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhooks import url_guard
from webhooks.deliveries import Attempt, Delivery, EndpointForDelivery, WebhookRules
from webhooks.sender import MAX_DRAINED_BYTES, WebhookSender

pytestmark = pytest.mark.anyio
RULES = WebhookRules(allow_private=True, timeout_s=3, jitter=0.0)
FIRST, SECOND = "hooks.example", "other.example"  # both resolve to 127.0.0.1, for the test's resolver only


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(subject: str, key, issuer: str, issuer_key, *, ca: bool, dns_name: str | None = None):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False)
    )  # fmt: skip
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                          key_encipherment=False, data_encipherment=False, key_agreement=False,
                          encipher_only=False, decipher_only=False), critical=True)  # fmt: skip
    else:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(dns_name)]), critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


@dataclass
class Authority:
    """A CA made for the test, and a certificate and key file for each name it was asked for."""

    folder: Path

    def __post_init__(self):
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.cert = _certificate("webhook test CA", self.key, "webhook test CA", self.key, ca=True)
        self.cert_file = self.folder / "ca.pem"
        self.cert_file.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def trust(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.cert_file))

    def server_context(self, dns_name: str) -> ssl.SSLContext:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _certificate(dns_name, key, "webhook test CA", self.key, ca=False, dns_name=dns_name)
        chain, key_file = self.folder / f"{dns_name}.pem", self.folder / f"{dns_name}.key"
        chain.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))  # fmt: skip
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(chain, key_file)
        return context


@dataclass
class Seen:
    sni: str | None  # the name the client asked for in its TLS hello
    host: str  # the Host header
    connection: int  # which TCP connection carried it (its client port)


class TlsReceiver:
    """HTTPS on 127.0.0.1 with HTTP/1.1 keep-alive; the certificate shown is the one for the SNI name asked for (or
    the first name's when it holds none for it); each request is recorded with its SNI name and its connection."""

    def __init__(self, contexts: dict[str, ssl.SSLContext], answer_body: bytes = b"ok"):
        self.seen: list[Seen] = []
        self.answer_body = answer_body
        default = next(iter(contexts.values()))
        sni_of: dict[int, str | None] = {}

        def choose(tls_socket, server_name, _context):
            sni_of[tls_socket.getpeername()[1]] = server_name
            tls_socket.context = contexts.get(server_name, default)

        for context in contexts.values():
            context.sni_callback = choose
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keeps the connection open for the next request

            def do_POST(self):  # noqa: N802 - the stdlib's name
                self.rfile.read(int(self.headers.get("content-length", 0)))
                port = self.client_address[1]
                receiver.seen.append(Seen(sni_of.get(port), self.headers["host"], port))
                self.send_response(200)
                self.send_header("content-length", str(len(receiver.answer_body)))
                self.end_headers()
                self.wfile.write(receiver.answer_body)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.socket = default.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> TlsReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def authority(tmp_path) -> Authority:
    return Authority(tmp_path)


@pytest.fixture(autouse=True)
def resolver(monkeypatch):
    """Both names resolve to 127.0.0.1 for this test's resolver; the system's knows neither."""

    def resolve(target: url_guard.WebhookTarget) -> list[str]:
        if target.host not in (FIRST, SECOND):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return ["127.0.0.1"]

    monkeypatch.setattr(url_guard, "resolve", resolve)


def _delivery(url: str, event_id: str = "msg_1") -> Delivery:
    endpoint = EndpointForDelivery(id="whk_1", url=url, enabled=True, secrets=["whsec_" + "A" * 32])
    return Delivery(member=f"{event_id}:whk_1", account="acme", event_id=event_id, event_type="review.created",
                    body=b'{"type": "review.created"}', attempts=0, round_start=0, created_at=time.time(),
                    endpoint=endpoint)  # fmt: skip


async def _send_in_turn(receiver: TlsReceiver, hosts: list[str], trust: ssl.SSLContext | None) -> list[Attempt]:
    """One delivery to each host in turn, from one sender (so that it may keep its connections between them)."""
    sender = WebhookSender(RULES, trust=trust)
    try:
        return [await sender.send(_delivery(f"https://{host}:{receiver.port}/hooks", f"msg_{n}"))
                for n, host in enumerate(hosts)]  # fmt: skip
    finally:
        await sender.aclose()


async def test_a_tls_receiver_is_reached_at_the_checked_address_with_its_certificate_verified_for_the_urls_host(
    authority,
):
    with TlsReceiver({FIRST: authority.server_context(FIRST)}) as receiver:
        [attempt] = await _send_in_turn(receiver, [FIRST], authority.trust())
        assert attempt.outcome == "delivered", attempt
        [seen] = receiver.seen
        assert (seen.sni, seen.host) == (FIRST, f"{FIRST}:{receiver.port}")


async def test_a_certificate_the_sender_does_not_trust_is_a_failed_attempt(authority):
    with TlsReceiver({FIRST: authority.server_context(FIRST)}) as receiver:
        [attempt] = await _send_in_turn(receiver, [FIRST], None)  # the default roots know nothing of the test's CA
        assert (attempt.outcome, attempt.final) == ("connect_error", False), attempt
        assert receiver.seen == []


async def test_a_certificate_for_another_name_is_refused_even_beside_a_kept_connection_verified_for_that_name(
    authority,
):
    # The receiver holds a certificate for FIRST only. A delivery to FIRST leaves a kept-alive connection to
    # 127.0.0.1; SECOND resolves to the same address, and must not ride on it: its own handshake meets FIRST's
    # certificate, which does not name it.
    with TlsReceiver({FIRST: authority.server_context(FIRST)}) as receiver:
        first, second = await _send_in_turn(receiver, [FIRST, SECOND], authority.trust())
        assert first.outcome == "delivered", first
        assert (second.outcome, second.final) == ("connect_error", False), second
        assert [seen.host for seen in receiver.seen] == [f"{FIRST}:{receiver.port}"]


async def test_two_hosts_on_one_address_never_share_a_connection(authority):
    contexts = {FIRST: authority.server_context(FIRST), SECOND: authority.server_context(SECOND)}
    with TlsReceiver(contexts) as receiver:
        attempts = await _send_in_turn(receiver, [FIRST, SECOND, FIRST, SECOND], authority.trust())
        assert [attempt.outcome for attempt in attempts] == ["delivered"] * 4, attempts
        # Each request went over a connection opened (SNI) for its own Host; each host kept its own connection.
        assert [seen.sni for seen in receiver.seen] == [FIRST, SECOND, FIRST, SECOND]
        assert all(seen.host == f"{seen.sni}:{receiver.port}" for seen in receiver.seen)
        connections = {host: {s.connection for s in receiver.seen if s.sni == host} for host in (FIRST, SECOND)}
        assert len(connections[FIRST]) == len(connections[SECOND]) == 1  # kept alive, per host
        assert connections[FIRST] != connections[SECOND]


async def test_an_answer_too_long_to_read_closes_its_connection_and_still_counts_by_its_status(authority):
    long_answer = b"x" * (MAX_DRAINED_BYTES * 64)
    with TlsReceiver({FIRST: authority.server_context(FIRST)}, answer_body=long_answer) as receiver:
        attempts = await _send_in_turn(receiver, [FIRST, FIRST], authority.trust())
        assert [attempt.outcome for attempt in attempts] == ["delivered"] * 2, attempts
        # Not read to its end, so not kept: the second request opened a connection of its own.
        assert len({seen.connection for seen in receiver.seen}) == 2
