"""A device in secure mode: read the query from the leader and the helper's HPKE config from
the helper (or its operator's pinned copy: `client.secure_keys`), refusing a query whose
leader config is missing or whose copy of the helper's key is not the helper's own; run the
mechanism locally exactly as in the trusted mode, shard the
answers with the query's VDAF, seal each share to its aggregator, and upload once, to the
leader. For a query that requires admission tokens, each report goes with a token whose
challenge is the query's (`report_challenge`), fetched from the issuer with the trusted mode's
client (`client.tokens`); a retry sends the same report with the same token."""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import grpc

from client.secure_keys import UntrustedAggregator, check_helper_copy
from client.tokens import IssuerClient, IssuerKey, check_issuer
from ldpcollect.admission.query_challenge import secure_query_challenge
from ldpcollect.admission.tokens import TokenChallenge
from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import DeviceDraw, Mechanism
from ldpcollect.randomness import OS_RANDOM, RandomSource
from ldpcollect.secure.query_vdaf import measurement, query_vdaf, vdaf_kind
from ldpcollect.secure.sealing import HpkeConfig, SealingError
from ldpcollect.secure.upload import REPORT_ID_SIZE, shard_report, shard_reports
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.v1 import secure_pb2_grpc as spb_grpc
from ldpcollect.wire import mechanism_from_proto


class MissingConfigs(UntrustedAggregator, ValueError):
    """The query lacks an aggregator's HPKE config: a device must not upload to it."""


def aggregator_configs(
    query: spb.SecureQuery, helper_config: HpkeConfig
) -> tuple[HpkeConfig, HpkeConfig]:
    """The leader's config (from the leader's `query`) and the helper's (`helper_config`,
    taken from the helper), once the leader's copy of the helper's is checked against it;
    MissingConfigs or UntrustedAggregator naming what is wrong."""
    if not query.leader_hpke_config:
        raise MissingConfigs("the query has no leader HPKE config: refusing to upload")
    try:
        leader = HpkeConfig.decode(query.leader_hpke_config)
    except SealingError as error:
        raise MissingConfigs(f"the leader HPKE config is malformed: {error}") from None
    if not query.helper_hpke_config:
        raise MissingConfigs("the query has no helper HPKE config: refusing to upload")
    check_helper_copy(query.helper_hpke_config, helper_config)
    if leader.public_key == helper_config.public_key:
        raise MissingConfigs("leader and helper share one key: not two aggregators")
    return leader, helper_config


def answer_rounds(draw: DeviceDraw) -> list[list[int]]:
    """The draw's 0/1 answer per target, for each of its rounds."""
    return [[int(b) for b in draw.answer_bits(r)] for r in range(1, draw.rounds + 1)]


class SecureDevice:
    """Seals reports for one secure query (checked once, at construction). The trust
    boundary is in the signature: the query (and the leader's key) comes from the leader,
    the helper's key from the helper."""

    def __init__(self, query: spb.SecureQuery, helper_config: HpkeConfig) -> None:
        self.query = query
        self.leader, self.helper = aggregator_configs(query, helper_config)
        self.mechanism: Mechanism = mechanism_from_proto(query.mechanism)
        self.kind = vdaf_kind(self.mechanism.name)
        self.vdaf = query_vdaf(self.kind, len(query.targets))

    def draw(self, location_id: int, source: RandomSource = OS_RANDOM) -> DeviceDraw:
        """The mechanism's draw, made once per device and kept for every round."""
        return self.mechanism.draw(location_id, list(self.query.targets), source)

    def seal(
        self,
        draw: DeviceDraw,
        report_id: bytes | None = None,
        *,
        rand: bytes | None = None,
        ikm_e: tuple[bytes, bytes] | None = None,
    ) -> bytes:
        """The encoded SecureReport. `rand` (the VDAF's sharding randomness) and `ikm_e` (the
        HPKE ephemeral keys' material) are fresh unless given, for conformance vectors."""
        return self.seal_measurement(
            measurement(self.kind, answer_rounds(draw)), report_id, rand=rand, ikm_e=ikm_e
        )

    def seal_many(self, draws: Sequence[DeviceDraw]) -> list[bytes]:
        """`seal` for many devices' draws at once, as a fleet simulation seals them."""
        return self.seal_measurements(
            [(measurement(self.kind, answer_rounds(draw)), None) for draw in draws]
        )

    def seal_measurements(
        self, measurements: Sequence[tuple[Sequence[int], bytes | None]]
    ) -> list[bytes]:
        """`seal_measurement` for many devices' (measurement, report id or None) at once: the
        same reports (fresh randomness each, a fresh report id where None), with every
        leader share sealed in one compiled call and every helper share in another."""
        reports = [
            (
                report_id or secrets.token_bytes(REPORT_ID_SIZE),
                values,
                secrets.token_bytes(self.vdaf.rand_size),
            )
            for values, report_id in measurements
        ]
        sealed = shard_reports(
            self.vdaf,
            self.leader,
            self.helper,
            self.query.query_id,
            self.query.upload_round,
            reports,
        )
        return [report.encode() for report in sealed]

    def fetch_token(self, issuer: IssuerClient) -> bytes:
        """One admission token for a report of this query (the issuer counts it against this
        device's K for the epoch). Keep it with the report: a retry sends both again."""
        key = issuer.key()
        [token] = issuer.tokens(key, [report_challenge(key, self.query)])
        return token

    def seal_measurement(
        self,
        values: Sequence[int],
        report_id: bytes | None = None,
        *,
        rand: bytes | None = None,
        ikm_e: tuple[bytes, bytes] | None = None,
    ) -> bytes:
        report = shard_report(
            self.vdaf,
            self.leader,
            self.helper,
            self.query.query_id,
            self.query.upload_round,
            report_id or secrets.token_bytes(REPORT_ID_SIZE),
            values,
            secrets.token_bytes(self.vdaf.rand_size) if rand is None else rand,
            ikm_e,
        )
        return report.encode()


def report_challenge(key: IssuerKey, query: spb.SecureQuery) -> TokenChallenge:
    """The challenge every report of the secure query carries a token for: bound to the
    query, its report kind and upload round, and both aggregators (origin_info: leader,
    helper). Refuses a query bound to another issuer than the one this device asks."""
    if not query.require_tokens:
        raise ParameterError("secure query", query.query_id, "one that requires tokens")
    check_issuer(key, query.token_issuer)
    kind = vdaf_kind(mechanism_from_proto(query.mechanism).name)
    return secure_query_challenge(
        query.token_issuer, query.query_id, kind, query.upload_round, list(query.token_origins)
    )


def fetch_query(channel: grpc.Channel, query_id: str) -> spb.SecureQuery:
    return spb_grpc.SecureCollectorStub(channel).GetSecureQuery(
        spb.GetSecureQueryRequest(query_id=query_id), timeout=30
    )


def upload(
    channel: grpc.Channel,
    reports: Sequence[bytes],
    timeout: float = 60,
    tokens: Sequence[bytes] = (),
) -> spb.UploadSecureReportsResponse:
    """Upload sealed reports (with one token each when the query requires them);
    acknowledged ones are durable at the leader."""
    return spb_grpc.SecureCollectorStub(channel).UploadSecureReports(
        spb.UploadSecureReportsRequest(reports=list(reports), tokens=list(tokens)),
        timeout=timeout,
    )
