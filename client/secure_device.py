"""A device in secure mode: read the query with both aggregators' HPKE configs (refusing a
query without them), run the mechanism locally exactly as in the trusted mode, shard the
answers with the query's VDAF, seal each share to its aggregator, and upload once, to the
leader. For a query that requires admission tokens, each report goes with a token whose
challenge is the query's (`report_challenge`), fetched from the issuer with the trusted mode's
client (`client.tokens`); a retry sends the same report with the same token."""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import grpc

from client.tokens import IssuerClient, IssuerKey, check_issuer
from ldpcollect.admission.query_challenge import secure_query_challenge
from ldpcollect.admission.tokens import TokenChallenge
from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import DeviceDraw, Mechanism
from ldpcollect.randomness import OS_RANDOM, RandomSource
from ldpcollect.secure.query_vdaf import measurement, query_vdaf, vdaf_kind
from ldpcollect.secure.sealing import HpkeConfig, SealingError
from ldpcollect.secure.upload import REPORT_ID_SIZE, shard_report
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.v1 import secure_pb2_grpc as spb_grpc
from ldpcollect.wire import mechanism_from_proto


class MissingConfigs(ValueError):
    """The query lacks an aggregator's HPKE config: a device must not upload to it."""


def aggregator_configs(query: spb.SecureQuery) -> tuple[HpkeConfig, HpkeConfig]:
    """The leader's and helper's configs, or MissingConfigs naming what is wrong."""
    configs = []
    for role, encoded in (
        ("leader", query.leader_hpke_config),
        ("helper", query.helper_hpke_config),
    ):
        if not encoded:
            raise MissingConfigs(f"the query has no {role} HPKE config: refusing to upload")
        try:
            configs.append(HpkeConfig.decode(encoded))
        except SealingError as error:
            raise MissingConfigs(f"the {role} HPKE config is malformed: {error}") from None
    if configs[0].public_key == configs[1].public_key:
        raise MissingConfigs("leader and helper share one key: not two aggregators")
    return configs[0], configs[1]


class SecureDevice:
    """Seals reports for one secure query (checked once, at construction)."""

    def __init__(self, query: spb.SecureQuery) -> None:
        self.query = query
        self.leader, self.helper = aggregator_configs(query)
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
        rounds = [[int(b) for b in draw.answer_bits(r)] for r in range(1, draw.rounds + 1)]
        return self.seal_measurement(
            measurement(self.kind, rounds), report_id, rand=rand, ikm_e=ikm_e
        )

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
