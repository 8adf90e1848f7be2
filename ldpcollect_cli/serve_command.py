"""`ldpcollect serve`: the trusted aggregator (the default), or a secure-mode leader or helper.

The options only; `serving.py` and `secure_serving.py` start the servers.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from ldpcollect.errors import ParameterError
from ldpcollect_cli.service_errors import guarded
from ldpcollect_cli.service_options import DEFAULT_SERVER, Token


def serve(
    db: Annotated[Path, typer.Option("--db", help="SQLite database file.")] = Path("ldpcollect.db"),
    listen: Annotated[
        str, typer.Option("--listen", help="host:port to listen on (port 0 = ephemeral).")
    ] = DEFAULT_SERVER,
    admin_token: Token = "",
    metrics_port: Annotated[
        int | None, typer.Option("--metrics-port", help="Prometheus /metrics port (0 = any).")
    ] = None,
    tls_cert: Annotated[
        Path | None,
        typer.Option(
            "--tls-cert",
            envvar="LDPCOLLECT_TLS_CERT",
            help="PEM server certificate (chain) for TLS; needs --tls-key.",
        ),
    ] = None,
    tls_key: Annotated[
        Path | None,
        typer.Option(
            "--tls-key", envvar="LDPCOLLECT_TLS_KEY", help="PEM private key of --tls-cert."
        ),
    ] = None,
    tls_client_ca: Annotated[
        Path | None,
        typer.Option(
            "--tls-client-ca",
            envvar="LDPCOLLECT_TLS_CLIENT_CA",
            help="Mutual TLS: PEM CA certificate(s); every client must present a certificate "
            "signed by one (clients: LDPCOLLECT_TLS_CLIENT_CERT and LDPCOLLECT_TLS_CLIENT_KEY).",
        ),
    ] = None,
    max_inflight_reports: Annotated[
        int,
        typer.Option(
            "--max-inflight-reports",
            min=1,
            help="Reports admitted but not yet committed; beyond it RESOURCE_EXHAUSTED with a "
            "retry hint (grpc-retry-pushback-ms).",
        ),
    ] = 200_000,
    max_streams: Annotated[
        int,
        typer.Option("--max-streams", min=1, help="Concurrent report streams (StreamReports)."),
    ] = 1_000,
    stream_idle_timeout: Annotated[
        float,
        typer.Option(
            "--stream-idle-timeout",
            min=0.001,
            help="Seconds a report stream may send nothing before it is ended (UNAVAILABLE).",
        ),
    ] = 30.0,
    reflection: Annotated[
        bool,
        typer.Option(
            "--reflection",
            help="Let server reflection list the Admin service too (by default it lists "
            "only the Collector and health).",
        ),
    ] = False,
    role: Annotated[
        str,
        typer.Option(
            "--role",
            help="trusted (one aggregator, the default), or a secure-mode aggregator: leader "
            "(devices upload to it; needs --helper) or helper (docs/secure-mode.md).",
        ),
    ] = "trusted",
    helper: Annotated[
        str | None,
        typer.Option(
            "--helper",
            help="Leader: the helper's HOST:PORT, or its replicas' (H1:P1,H2:P2: jobs are "
            "spread over them and a job whose helper is down goes to another).",
        ),
    ] = None,
    peer_token: Annotated[
        str,
        typer.Option(
            "--peer-token",
            envvar="LDPCOLLECT_PEER_TOKEN",
            help="Leader and helper: the bearer token the leader presents to the helper.",
        ),
    ] = "",
    helper_tls_ca: Annotated[
        Path | None,
        typer.Option("--helper-tls-ca", help="Leader: PEM CA to verify a TLS helper."),
    ] = None,
    origin_name: Annotated[
        str,
        typer.Option(
            "--origin-name",
            help="Leader and helper: this aggregator's name (host:port) in the admission "
            "tokens' challenges (default: the --listen host and the bound port).",
        ),
    ] = "",
    token_directory: Annotated[
        Path | None,
        typer.Option(
            "--token-directory",
            help="The token issuer's directory file (`ldpcollect issuer serve "
            "--directory-out`): lets queries require admission tokens (query create "
            "--require-tokens). Re-read when it changes.",
        ),
    ] = None,
    token_verify_processes: Annotated[
        int,
        typer.Option(
            "--token-verify-processes",
            min=0,
            max=256,
            help="Worker processes verifying admission tokens (0: one worker thread); "
            "verification scales with the cores given here.",
        ),
    ] = 0,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            envvar="LDPCOLLECT_STORE",
            help="postgresql://USER@HOST:PORT/DB: keep the state in PostgreSQL, shared by any "
            "number of replicas (instead of the SQLite file --db); the schema is created or "
            "migrated at start (or ahead: `ldpcollect store migrate`). With --role leader or "
            "helper: that role's state and HPKE key pair, in a schema of the role's own "
            "(ldpcollect_secure_leader or _helper), shared by the role's replicas.",
        ),
    ] = None,
    store_pool_size: Annotated[
        int,
        typer.Option(
            "--store-pool-size",
            min=1,
            max=100,
            help="With --store: database connections this replica keeps at most.",
        ),
    ] = 4,
    budget: Annotated[
        str | None,
        typer.Option(
            "--budget",
            help="EPS,DELTA[,FILTER]: the privacy budget for the public view (FILTER zcdp, the "
            "default, or renyi), fixed at start before the first release (the same budget "
            "again at a restart changes nothing; a different one after releases is refused). "
            "Without it or --no-budget, releases are refused until `ldpcollect ledger "
            "set-budget` sets one. For the trusted aggregator and the leader (a helper's own "
            "budget is --budget-epsilon).",
        ),
    ] = None,
    no_budget: Annotated[
        bool,
        typer.Option(
            "--no-budget",
            help="Allow releases without any budget (each then says so in its output).",
        ),
    ] = False,
    min_batch: Annotated[
        int | None,
        typer.Option(
            "--min-batch",
            min=1,
            help="Helper policy: refuse a query whose min_reports is lower, and release "
            "nothing before aggregating this many reports itself (default 100).",
            rich_help_panel="Helper policy (--role helper; docs/secure-mode.md)",
        ),
    ] = None,
    min_noise_sigma: Annotated[
        str | None,
        typer.Option(
            "--min-noise-sigma",
            help="Helper policy: the discrete Gaussian sigma it adds at release is the "
            "query's, never below this (default: the query's).",
            rich_help_panel="Helper policy (--role helper; docs/secure-mode.md)",
        ),
    ] = None,
    accept_mechanism: Annotated[
        list[str] | None,
        typer.Option(
            "--accept-mechanism",
            help="Helper policy: a mechanism it takes part in (repeat; default rr and sp).",
            rich_help_panel="Helper policy (--role helper; docs/secure-mode.md)",
        ),
    ] = None,
    max_targets: Annotated[
        int | None,
        typer.Option(
            "--max-targets",
            min=1,
            help="Helper policy: refuse a query with more targets (default 100000).",
            rich_help_panel="Helper policy (--role helper; docs/secure-mode.md)",
        ),
    ] = None,
    max_local_epsilon: Annotated[
        float | None,
        typer.Option(
            "--max-local-epsilon",
            min=0.0,
            help="Helper policy: refuse a mechanism whose one report leaks more (default: "
            "any finite epsilon).",
            rich_help_panel="Helper policy (--role helper; docs/secure-mode.md)",
        ),
    ] = None,
    collector_config: Annotated[
        list[str] | None,
        typer.Option(
            "--collector-config",
            help="Helper policy: a collector HPKE config (66 hex characters) it seals to "
            "(repeat; default: each query's own, printed and recorded for audit).",
            rich_help_panel="Helper policy (--role helper; docs/secure-mode.md)",
        ),
    ] = None,
    budget_epsilon: Annotated[
        float | None,
        typer.Option(
            "--budget-epsilon",
            min=0.0,
            help="Helper policy: its own privacy ledger's budget; it refuses a query, or a "
            "release, beyond it (0: no budget; default: keep the stored one).",
            rich_help_panel="Helper policy (--role helper; docs/secure-mode.md)",
        ),
    ] = None,
    budget_delta: Annotated[
        float,
        typer.Option(
            "--budget-delta",
            min=0.0,
            help="Helper policy: its ledger's delta, with --budget-epsilon.",
            rich_help_panel="Helper policy (--role helper; docs/secure-mode.md)",
        ),
    ] = 0.0,
    peer_tls_cert: Annotated[
        Path | None,
        typer.Option(
            "--peer-tls-cert",
            envvar="LDPCOLLECT_PEER_TLS_CERT",
            help="Leader: PEM client certificate it presents to a helper started with "
            "--tls-client-ca (mutual TLS); needs --peer-tls-key and --helper-tls-ca.",
        ),
    ] = None,
    peer_tls_key: Annotated[
        Path | None,
        typer.Option(
            "--peer-tls-key",
            envvar="LDPCOLLECT_PEER_TLS_KEY",
            help="Leader: PEM private key of --peer-tls-cert.",
        ),
    ] = None,
    public_listen: Annotated[
        str | None,
        typer.Option(
            "--public-listen",
            help="Leader and helper: a second host:port serving only this aggregator's HPKE "
            "config (AggregatorKeys) and health, TLS without client certificates: where "
            "devices fetch a mutual-TLS helper's key.",
        ),
    ] = None,
    insecure_peer: Annotated[
        bool,
        typer.Option(
            "--insecure-peer",
            help="Leader and helper: allow a plaintext peer channel beyond loopback (the peer "
            "token and verify keys then cross the network in clear; logged loudly).",
        ),
    ] = False,
) -> None:
    """Run the aggregator (gRPC Collector + Admin) until SIGINT/SIGTERM. Plaintext unless
    --tls-cert/--tls-key are given (a warning says so when listening beyond loopback)."""
    from ldpcollect_cli.serving import ServeSettings, serve_blocking

    settings = ServeSettings(
        db,
        listen,
        admin_token,
        metrics_port,
        tls_cert,
        tls_key,
        tls_client_ca,
        max_inflight_reports,
        max_streams,
        stream_idle_timeout,
        reflection,
        token_directory,
        token_verify_processes,
        store,
        store_pool_size,
    )
    guarded(lambda: _check_budget(budget, no_budget))  # a bad --budget exits here
    if role == "helper" and (budget is not None or no_budget):
        guarded(_refuse_helper_budget)
    if role in ("trusted", "leader"):  # whoever releases fixes a budget first, or opts out
        parsed = parse_budget(budget, no_budget)
        settings = replace(settings, budget=parsed, require_budget=not no_budget)
    if role != "trusted":
        from ldpcollect_cli.secure_serving import PeerOptions, PolicyOptions, serve_secure

        policy = PolicyOptions(
            min_batch,
            min_noise_sigma,
            tuple(accept_mechanism or ()),
            max_targets,
            max_local_epsilon,
            tuple(collector_config or ()),
            budget_epsilon,
            budget_delta,
        )
        peer = PeerOptions(peer_token, helper_tls_ca, peer_tls_cert, peer_tls_key, insecure_peer)
        guarded(
            lambda: serve_secure(role, settings, helper, peer, origin_name, policy, public_listen)
        )
        return
    if helper is not None or helper_tls_ca is not None or origin_name:
        guarded(lambda: _refuse_helper_options(helper))
    secure_only = {
        "--min-batch": min_batch,
        "--min-noise-sigma": min_noise_sigma,
        "--accept-mechanism": accept_mechanism,
        "--max-targets": max_targets,
        "--max-local-epsilon": max_local_epsilon,
        "--collector-config": collector_config,
        "--budget-epsilon": budget_epsilon,
        "--peer-tls-cert": peer_tls_cert,
        "--peer-tls-key": peer_tls_key,
        "--insecure-peer": insecure_peer or None,
        "--public-listen": public_listen,
    }
    given = [name for name, value in secure_only.items() if value is not None]
    if given:
        guarded(lambda: _refuse_secure_options(given))
    guarded(lambda: serve_blocking(settings))


def parse_budget(text: str | None, no_budget: bool) -> tuple[float, float, str] | None:
    """`--budget EPS,DELTA[,FILTER]` as (epsilon, delta, filter); ParameterError naming what
    is wrong."""
    if text is None:
        return None
    if no_budget:
        raise ParameterError("--budget/--no-budget", text, "one of them, not both")
    parts = text.split(",")
    try:
        epsilon, delta = (float(p) for p in parts[:2])
    except ValueError:
        raise ParameterError("--budget", text, "EPS,DELTA[,FILTER], e.g. 1,1e-6") from None
    if len(parts) > 3 or (len(parts) == 3 and parts[2] not in ("zcdp", "renyi")):
        raise ParameterError("--budget", text, "EPS,DELTA[,FILTER], FILTER zcdp or renyi")
    if not (0 < epsilon < float("inf")) or not 0 <= delta < 1:
        raise ParameterError("--budget", text, "epsilon in (0, inf) and delta in [0, 1)")
    return epsilon, delta, parts[2] if len(parts) == 3 else ""


def _check_budget(text: str | None, no_budget: bool) -> None:
    parse_budget(text, no_budget)


def _refuse_helper_budget() -> None:
    raise ParameterError(
        "--budget/--no-budget",
        None,
        "given only with --role trusted|leader (whoever publishes releases)",
        "a helper's own ledger takes --budget-epsilon/--budget-delta",
    )


def _refuse_helper_options(helper: str | None) -> None:
    raise ParameterError(
        "--helper/--helper-tls-ca/--origin-name", helper, "given only with --role leader|helper"
    )


def _refuse_secure_options(given: list[str]) -> None:
    peer_only = set(given) <= {
        "--peer-tls-cert",
        "--peer-tls-key",
        "--insecure-peer",
        "--public-listen",
    }
    role = "--role leader|helper" if peer_only else "--role helper"
    raise ParameterError("/".join(given), None, f"given only with {role}")
