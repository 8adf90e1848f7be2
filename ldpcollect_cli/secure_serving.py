"""`ldpcollect serve --role leader|helper`: one of the secure mode's two aggregators in the
foreground, announcing the address it bound, its HPKE config and (helper) its policy."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from aggregator.config import AggregatorConfig
from aggregator.secure.helper_policy import (
    DEFAULT_MAX_TARGETS,
    DEFAULT_MECHANISMS,
    DEFAULT_MIN_BATCH,
    HelperPolicy,
)
from aggregator.secure.server import HELPER, LEADER, SecureRoleConfig, SecureServer, run
from aggregator.server import ensure_port_free, transport_name
from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms.registry import MECHANISM_PARAMS
from ldpcollect.rational import parse_rational_text
from ldpcollect.secure.sealing import HpkeConfig, SealingError
from ldpcollect.targets import split_addresses
from ldpcollect_cli.serving import ServeSettings, is_loopback, plaintext_warning
from ldpcollect_cli.store_command import is_postgres_url

ROLES = ("trusted", "leader", "helper")


def secure_ready_prefix(role: str) -> str:
    return f"ldpcollect {role} serving on "


@dataclass(frozen=True)
class PolicyOptions:
    """`serve --role helper`'s policy options as given (None: not given)."""

    min_batch: int | None = None
    min_noise_sigma: str | None = None
    mechanisms: tuple[str, ...] = ()
    max_targets: int | None = None
    max_local_epsilon: float | None = None
    collector_configs: tuple[str, ...] = ()
    budget_epsilon: float | None = None
    budget_delta: float = 0.0

    def given(self) -> bool:
        return self != PolicyOptions()

    def policy(self) -> HelperPolicy:
        sigma = None
        if self.min_noise_sigma:
            sigma = parse_rational_text("--min-noise-sigma", self.min_noise_sigma, "[0, inf)")
            if sigma < 0:
                raise ParameterError("--min-noise-sigma", self.min_noise_sigma, "[0, inf)")
            sigma = Fraction(sigma) or None
        for name in self.mechanisms:
            if name not in MECHANISM_PARAMS:
                raise ParameterError(
                    "--accept-mechanism", name, f"one of {sorted(MECHANISM_PARAMS)}"
                )
        return HelperPolicy(
            min_batch=DEFAULT_MIN_BATCH if self.min_batch is None else self.min_batch,
            min_noise_sigma=sigma,
            mechanisms=self.mechanisms or DEFAULT_MECHANISMS,
            max_targets=DEFAULT_MAX_TARGETS if self.max_targets is None else self.max_targets,
            max_local_epsilon=self.max_local_epsilon,
            collector_configs=tuple(_collector_config(text) for text in self.collector_configs),
        )

    def budget(self) -> tuple[float, float] | None:
        return None if self.budget_epsilon is None else (self.budget_epsilon, self.budget_delta)


def _collector_config(text: str) -> bytes:
    try:
        return HpkeConfig.decode(bytes.fromhex(text.strip())).encode()
    except (ValueError, SealingError) as error:
        raise ParameterError(
            "--collector-config", text, "an HPKE config in hex (66 characters)", str(error)
        ) from None


@dataclass(frozen=True)
class PeerOptions:
    """The leader-helper channel: the shared token, the helper's CA and the leader's client
    certificate (mutual TLS), and whether plaintext beyond loopback is allowed."""

    token: str
    helper_tls_ca: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    insecure: bool = False


def insecure_peer_warning(role: str, address: str) -> str:
    return (
        f"INSECURE PEER CHANNEL ({role}): the leader-helper traffic to/at {address} is "
        "PLAINTEXT beyond loopback (--insecure-peer): the peer token and every query's verify "
        "key cross the network in clear, and anyone on the path can act as the leader. Use "
        "--tls-cert/--tls-key/--tls-client-ca on the helper and --helper-tls-ca/--peer-tls-cert/"
        "--peer-tls-key on the leader."
    )


def check_peer_channel(
    role: str, base: AggregatorConfig, helper: str | None, peer: PeerOptions
) -> None:
    """Refuse a plaintext peer channel beyond loopback unless --insecure-peer (then warn
    loudly on stderr): the leader's to its helper, the helper's own listening port."""
    if role == LEADER:
        assert helper is not None
        plaintext, address = peer.helper_tls_ca is None, helper
    else:
        plaintext, address = not base.tls, base.listen
    if not plaintext or all(is_loopback(part) for part in address.split(",")):
        return
    if not peer.insecure:
        option = "--helper-tls-ca" if role == LEADER else "--tls-cert/--tls-key"
        raise ParameterError(
            option,
            None,
            "given: the peer channel to a non-loopback address must use TLS",
            f"{address} is not loopback; --insecure-peer allows plaintext (not for production)",
        )
    sys.stderr.write(f"WARNING: {insecure_peer_warning(role, address)}\n")
    sys.stderr.flush()


def _check_role_options(role: str, peer: PeerOptions, policy: PolicyOptions) -> None:
    if role != HELPER and policy.given():
        raise ParameterError("helper policy options", None, "given only with --role helper")
    if (peer.tls_cert is None) != (peer.tls_key is None):
        raise ParameterError(
            "--peer-tls-cert/--peer-tls-key",
            (peer.tls_cert, peer.tls_key),
            "both PEM files (client certificate and its key) or neither",
        )
    if peer.tls_cert is not None and (role != LEADER or peer.helper_tls_ca is None):
        raise ParameterError(
            "--peer-tls-cert", peer.tls_cert, "given only with --role leader and --helper-tls-ca"
        )


def serve_secure_blocking(
    role: str,
    base: AggregatorConfig,
    helper: str | None,
    peer: PeerOptions,
    token_directory: Path | None = None,
    origin_name: str = "",
    policy: PolicyOptions | None = None,
    public_listen: str | None = None,
    release_budget: tuple[float, float, str] | None = None,
    require_budget: bool = False,
) -> None:
    """`release_budget` and `require_budget` are the leader's `--budget` / not `--no-budget`:
    it publishes releases, so like the trusted aggregator it refuses them until a budget is
    fixed, unless the operator opted out."""
    policy = policy or PolicyOptions()
    if not peer.token:
        raise ParameterError(
            "--peer-token",
            "",
            "a non-empty token shared by leader and helper (or LDPCOLLECT_PEER_TOKEN)",
        )
    if role == LEADER:
        if not helper:
            raise ParameterError("--helper", "", "the helper's HOST:PORT (--role leader)")
        split_addresses(helper, "--helper")  # HOST:PORT, or several helper replicas'
    elif helper:
        raise ParameterError("--helper", helper, "given only with --role leader")
    _check_role_options(role, peer, policy)
    helper_policy = policy.policy()
    check_peer_channel(role, base, helper, peer)
    warning = plaintext_warning(base.listen, base.tls)
    if warning is not None:
        sys.stderr.write(f"WARNING: {warning}\n")
        sys.stderr.flush()
    ensure_port_free(base.listen)
    identity = None
    if peer.tls_cert is not None and peer.tls_key is not None:
        identity = (peer.tls_cert, peer.tls_key)
    config = SecureRoleConfig(
        role,
        base,
        peer.token,
        helper,
        peer.helper_tls_ca,
        token_directory=token_directory,
        origin_name=origin_name,
        policy=helper_policy,
        budget=policy.budget(),
        release_budget=release_budget,
        require_budget=require_budget,
        peer_identity=identity,
        audit=_print_line,
        public_listen=public_listen,
    )

    def announce(server: SecureServer, port: int) -> None:
        host = base.listen.rsplit(":", 1)[0]
        key = server.key_pair.config
        metrics = f", metrics on port {server.metrics_port}" if server.metrics_port else ""
        if server.tokens.keys is not None:
            metrics += f", tokens of {server.tokens.issuer_name()}"
        if server.public_port is not None:
            metrics += f", its key on port {server.public_port}"
        sys.stdout.write(
            f"{secure_ready_prefix(role)}{host}:{port} ({transport_name(base)}, db "
            f"{server.store.name}, HPKE config id {key.config_id}{metrics})\n"
        )
        sys.stdout.write(f"HPKE config {key.encode().hex()} (devices may pin it)\n")
        if role == HELPER:
            sys.stdout.write(f"helper policy: {helper_policy.summary()}\n")
        sys.stdout.flush()

    run(config, on_started=announce)


def _print_line(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def serve_secure(
    role: str,
    settings: ServeSettings,
    helper: str | None,
    peer: PeerOptions,
    origin_name: str = "",
    policy: PolicyOptions | None = None,
    public_listen: str | None = None,
) -> None:
    """`serve --role ROLE` with the trusted mode's options (db, listen, tokens, TLS, metrics),
    the peer channel's and (helper) its policy's."""
    if role not in ROLES[1:]:
        raise ParameterError("--role", role, "trusted, leader or helper")
    if (settings.tls_cert is None) != (settings.tls_key is None):
        raise ParameterError(
            "--tls-cert/--tls-key",
            (settings.tls_cert, settings.tls_key),
            "both PEM files (certificate and its private key) or neither",
        )
    if settings.store is not None and not is_postgres_url(settings.store):
        raise ParameterError(
            "--store", settings.store, "a PostgreSQL URL: postgresql://USER@HOST:PORT/DB"
        )
    if role == LEADER and not settings.admin_token:
        raise ParameterError(
            "admin token", "", "a non-empty token (--admin-token or LDPCOLLECT_ADMIN_TOKEN)"
        )
    base = AggregatorConfig(
        db_path=settings.db,
        # The helper serves no admin RPC; the config wants a token all the same.
        admin_token=settings.admin_token or "unused-by-the-helper",
        listen=settings.listen,
        metrics_port=settings.metrics_port,
        tls_cert=settings.tls_cert,
        tls_key=settings.tls_key,
        tls_client_ca=settings.tls_client_ca,
        store_url=settings.store,
        store_pool_size=settings.store_pool_size,
    )
    serve_secure_blocking(
        role,
        base,
        helper,
        peer,
        settings.token_directory,
        origin_name,
        policy,
        public_listen,
        settings.budget,
        settings.require_budget,
    )
