"""Helper: its side of aggregation.proto (served by `services`, which checks the peer token).

It provisions queries; for each aggregation job it opens the sealed shares, verifies them with
the leader's verifier shares, aggregates the valid ones and commits (answer, report ids,
aggregate share) in one transaction before answering. A job id seen before gets its stored
answer; a report id seen in another job is refused as REPLAY. For a query that requires
admission tokens it verifies each report's token itself (`token_check`) and spends the nonces
in the job's transaction; a report whose token it refuses is refused (TOKEN_...) and adds
nothing at either aggregator. It checks every query against its own policy before taking
part (`helper_policy`: minimum batch, noise floor, mechanisms, collector keys, its own
ledger) and keeps nothing for a query it refuses. It gives its noised aggregate share once
per query (a retry gets the same bytes), only after counting itself that it aggregated
enough reports, sealed to the collector under a binding of its own parameters, count and
noise."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from fractions import Fraction

from aggregator.errors import FailedPrecondition, Invalid
from aggregator.release import StoredLedger, iso_time
from aggregator.secure.helper_policy import HelperPolicy, PolicyRefusal
from aggregator.secure.metrics import SecureMetrics
from aggregator.secure.queries import mechanism_of, sigma_of, vdaf_of
from aggregator.secure.release_share import noised_sealed_share
from aggregator.secure.spent_tokens import nonce_of
from aggregator.secure.store import StoredQuery
from aggregator.secure.store_api import SecureStoreApi
from aggregator.secure.token_check import (
    TOKEN_MISSING,
    TOKEN_REPLAY,
    SecureTokens,
    challenge_of,
    requires_tokens,
)
from aggregator.secure.views import secure_claims
from ldpcollect.accounting.ledger import BudgetExceeded
from ldpcollect.accounting.release_cost import PrivacyClaim
from ldpcollect.admission.errors import AdmissionError
from ldpcollect.admission.verification import Verdict
from ldpcollect.mechanisms import Mechanism
from ldpcollect.rational import parse_rational_text
from ldpcollect.release_noise import validate_noise_sigma
from ldpcollect.secure.query_vdaf import VDAF_KINDS, query_vdaf, upload_round, vdaf_kind
from ldpcollect.secure.sealing import ROLE_HELPER, HpkeConfig, HpkeKeyPair, SealingError
from ldpcollect.secure.share_binding import sigma_text
from ldpcollect.secure.upload import (
    Prepared,
    ReportRejected,
    SecureFormatError,
    check_report_id,
    finish_one,
    open_query_shares,
    vdaf_context,
    verify_opened,
)
from ldpcollect.v1 import aggregation_pb2 as apb
from ldpcollect.vdaf.errors import VdafError
from ldpcollect.vdaf.prio3 import VERIFY_KEY_SIZE
from ldpcollect.wire import mechanism_from_proto, validate_query_id

REPLAY = "REPLAY"
# Refusal name and detail, by report id.
Refusals = dict[bytes, tuple[str, str]]


def token_refusals(
    tokens: SecureTokens,
    query: StoredQuery,
    reports: list[apb.HelperReport],
    spent: Callable[[list[bytes]], set[bytes]],
) -> tuple[Refusals, list[tuple[bytes, bytes]]]:
    """The helper's own check of the job's tokens (reports not seen before): the refusals,
    and the (nonce, report id) pairs to spend with the job. `spent(nonces)` says which
    nonces this helper spent before."""
    refusals: Refusals = {}
    verdicts = tokens.check(query, [item.token for item in reports])
    valid = [
        (item.report_id, nonce_of(item.token))
        for item, verdict in zip(reports, verdicts, strict=True)
        if verdict is Verdict.VALID
    ]
    for item, verdict in zip(reports, verdicts, strict=True):
        if not item.token:
            refusals[item.report_id] = (TOKEN_MISSING, "the leader sent no token for it")
        elif verdict is not Verdict.VALID:
            refusals[item.report_id] = (f"TOKEN_{verdict.name}", f"the token is {verdict.value}")
    before = spent([nonce for _, nonce in valid])
    spend: list[tuple[bytes, bytes]] = []
    in_job: set[bytes] = set()
    for report_id, nonce in valid:
        if nonce in before or nonce in in_job:
            refusals[report_id] = (TOKEN_REPLAY, "its token was spent by another report")
            continue
        in_job.add(nonce)
        spend.append((nonce, report_id))
    return refusals, spend


def verify_job(
    query: StoredQuery,
    key_pair: HpkeKeyPair,
    request: apb.AggregationJobRequest,
    seen: set[bytes],
    refused: Refusals | None = None,
) -> tuple[list[apb.HelperResult], list[int], int]:
    """The helper's half of one job: per report the verifier message or a refusal (those in
    `refused` are refused before anything is opened), the sum of the accepted output shares,
    and how many were accepted. Each share is opened, then the opened ones are verified and
    combined with the leader's verifier shares in one call each."""
    vdaf = vdaf_of(query)
    results = []
    in_job: set[bytes] = set()
    candidates: list[tuple[apb.HelperResult, apb.HelperReport]] = []
    for item in request.reports:
        result = apb.HelperResult(report_id=item.report_id)
        results.append(result)
        if item.report_id in seen or item.report_id in in_job:
            result.refusal, result.detail = REPLAY, "this report id was aggregated before"
            continue
        in_job.add(item.report_id)
        if refused and item.report_id in refused:
            result.refusal, result.detail = refused[item.report_id]
            continue
        try:
            check_report_id(item.report_id)
        except SecureFormatError as error:
            result.refusal, result.detail = "WRONG_LENGTH", str(error)
            continue
        candidates.append((result, item))
    # the shares opened in one compiled call (the reference names what it leaves)
    shares = open_query_shares(
        key_pair,
        ROLE_HELPER,
        query.query_id,
        query.params["upload_round"],
        [(item.report_id, item.public_share, item.helper_ciphertext) for _, item in candidates],
    )
    opened: list[tuple[apb.HelperResult, bytes, tuple[bytes, bytes, bytes]]] = []
    for (result, item), share in zip(candidates, shares, strict=True):
        if isinstance(share, ReportRejected):
            result.refusal, result.detail = share.reason.name, share.detail
            continue
        opened.append(
            (result, item.leader_verifier_share, (item.report_id, item.public_share, share))
        )
    prepared = verify_opened(
        vdaf, ROLE_HELPER, query.verify_key, query.query_id, [o[2] for o in opened]
    )
    verified: list[tuple[apb.HelperResult, bytes, Prepared]] = []
    for (result, theirs, _), mine in zip(opened, prepared, strict=True):
        if isinstance(mine, ReportRejected):
            result.refusal, result.detail = mine.reason.name, mine.detail
        else:
            verified.append((result, theirs, mine))
    ctx = vdaf_context(query.query_id)
    messages = vdaf.verifier_messages_encoded(
        ctx, [[theirs, mine.share.verifier_share] for _, theirs, mine in verified]
    )
    outs: list[bytes] = []
    for (result, _, mine), message in zip(verified, messages, strict=True):
        try:
            if isinstance(message, VdafError):
                raise message
            out = finish_one(mine, vdaf.decode_verifier_message(message))
        except VdafError as error:
            result.refusal, result.detail = "BAD_PROOF", str(error)
            continue
        except ReportRejected as rejected:
            result.refusal, result.detail = rejected.reason.name, rejected.detail
            continue
        result.verifier_message = message
        outs.append(out)
    return results, vdaf.agg_encoded(outs), len(outs)


class HelperHandler:
    """The helper's steps; each runs in a worker thread, jobs one at a time (the caller's
    lock), so a report id cannot be aggregated by two jobs at once."""

    def __init__(
        self,
        store: SecureStoreApi,
        key_pair: HpkeKeyPair,
        metrics: SecureMetrics,
        tokens: SecureTokens | None = None,
        origin_name: str = "",
        policy: HelperPolicy | None = None,
        audit: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.store, self.key_pair, self.metrics = store, key_pair, metrics
        self.tokens = tokens or SecureTokens(None)
        self.origin_name = origin_name  # its name in token challenges (host:port)
        self.policy = policy or HelperPolicy()
        self.audit = audit  # one line per query it takes part in (the operator's record)

    def hpke_config(self) -> apb.GetHpkeConfigResponse:
        return apb.GetHpkeConfigResponse(
            hpke_config=self.key_pair.config.encode(),
            origin_name=self.origin_name,
            token_issuer=self.tokens.issuer_name(),
        )

    def _token_params(self, request: apb.ProvisionQueryRequest) -> dict[str, object]:
        """A token-requiring query's issuer and origins, checked against this helper."""
        if not request.token_issuer:
            return {}
        accepted = self.tokens.require_issuer("helper")
        if request.token_issuer != accepted:
            raise FailedPrecondition(
                f"the query requires tokens of {request.token_issuer!r} but this helper "
                f"accepts {accepted!r}: give both aggregators the same --token-directory"
            )
        origins = list(request.token_origins)
        if self.origin_name.lower() not in (name.lower() for name in origins):
            raise Invalid(
                f"the token origins {origins} do not name this helper ({self.origin_name})"
            )
        params: dict[str, object] = {"token_issuer": request.token_issuer}
        params["token_origins"] = origins
        return params

    def _claims(
        self, mechanism: Mechanism, targets: int, sigma: Fraction | None, min_reports: int
    ) -> tuple[StoredLedger, list[PrivacyClaim]]:
        """This helper's ledger and a release's claims at the noise it adds itself."""
        stored = StoredLedger.from_body(self.store.ledger())
        claims = secure_claims(mechanism, targets, sigma, stored.reporting_delta, min_reports)
        return stored, claims

    def provision(self, request: apb.ProvisionQueryRequest) -> apb.ProvisionQueryResponse:
        validate_query_id(request.query_id)
        if request.vdaf not in VDAF_KINDS or not 1 <= request.targets <= 100_000:
            raise Invalid(f"vdaf must be one of {VDAF_KINDS} over 1 to 100000 targets")
        if request.upload_round != upload_round(request.vdaf):
            raise Invalid(f"upload_round must be {upload_round(request.vdaf)}")
        if len(request.verify_key) != VERIFY_KEY_SIZE:
            raise Invalid(f"a verify key is {VERIFY_KEY_SIZE} bytes")
        try:
            HpkeConfig.decode(request.collector_hpke_config)
        except SealingError as error:
            raise Invalid(f"collector HPKE config: {error}") from None
        mechanism = mechanism_from_proto(request.mechanism)
        if vdaf_kind(mechanism.name) != request.vdaf:
            raise Invalid(f"mechanism {mechanism.name!r} does not use vdaf {request.vdaf!r}")
        query_sigma = None
        if request.noise_sigma:
            query_sigma = parse_rational_text("noise_sigma", request.noise_sigma, "(0, inf)")
            validate_noise_sigma(query_sigma)
        self.policy.check_query(
            request.min_reports, mechanism, request.targets, request.collector_hpke_config
        )
        sigma = self.policy.noise_sigma(query_sigma)
        stored, claims = self._claims(mechanism, request.targets, sigma, request.min_reports)
        try:
            stored.ledger.check(claims)
        except BudgetExceeded as error:
            raise PolicyRefusal("its own ledger, --budget-epsilon", str(error)) from None
        params = {
            "vdaf": request.vdaf,
            "targets": request.targets,
            "upload_round": request.upload_round,
            "collector_config": request.collector_hpke_config.hex(),
            "noise_sigma": sigma_text(sigma),
            "query_noise_sigma": request.noise_sigma,
            "min_reports": request.min_reports,
            "mechanism": mechanism.name,
            "mechanism_params": mechanism.params(),
            **self._token_params(request),
        }
        if requires_tokens(params):
            try:
                challenge_of(params, request.query_id)
            except AdmissionError as error:
                raise Invalid(f"no token challenge for this query: {error}") from None
        vdaf = query_vdaf(request.vdaf, request.targets)
        self.store.provision_query(
            request.query_id, params, request.verify_key, vdaf.encode_agg_share(vdaf.agg_init())
        )
        pinned = "pinned" if self.policy.collector_configs else "the query's, not pinned"
        self.audit(
            f"helper takes part in query {request.query_id}: {mechanism.name} "
            f"{mechanism.params()}, {request.targets} targets, min_reports "
            f"{request.min_reports}, noise sigma {sigma_text(sigma) or 'none'}; seals to "
            f"collector key {request.collector_hpke_config.hex()} ({pinned})"
        )
        return apb.ProvisionQueryResponse(noise_sigma=sigma_text(sigma))

    def aggregate(self, request: apb.AggregationJobRequest) -> apb.AggregationJobResponse:
        if len(request.job_id) != 16:
            raise Invalid("a job id is 16 bytes")
        stored = self.store.job_response(request.job_id)
        if stored is not None:
            return apb.AggregationJobResponse.FromString(stored)
        query = self.store.query(request.query_id)
        ids = [r.report_id for r in request.reports]
        seen = self.store.seen_reports(request.query_id, ids)
        refused: Refusals = {}
        spend: list[tuple[bytes, bytes]] = []
        if requires_tokens(query.params):
            unseen = {i.report_id: i for i in reversed(request.reports) if i.report_id not in seen}
            fresh = list(reversed(unseen.values()))  # each report id once, as it first came
            refused, spend = token_refusals(
                self.tokens,
                query,
                fresh,
                lambda nonces: self.store.spent_nonces(request.query_id, nonces),
            )
        results, total, accepted = verify_job(query, self.key_pair, request, seen, refused)
        response = apb.AggregationJobResponse(results=results)
        vdaf = vdaf_of(query)

        def merge(old: bytes) -> bytes:
            return vdaf.encode_agg_share(vdaf.merge([vdaf.decode_agg_share(old), total]))

        kept = self.store.record_job(
            request.query_id,
            request.job_id,
            response.SerializeToString(),
            ids,
            accepted,
            len(ids) - accepted,
            merge,
            spend,
            replayed=seen,
        )
        for outcome, count in Counter(r.refusal or "aggregated" for r in results).items():
            self.metrics.reports.labels(outcome).inc(count)
        self.metrics.jobs.inc()
        return apb.AggregationJobResponse.FromString(kept)

    def aggregate_share(self, request: apb.AggregateShareRequest) -> apb.AggregateShareResponse:
        """Once per query (a retry gets the same bytes): the helper's own count checked
        against the leader's, its floor and the query's minimum; the collector key against
        its pins; its ledger charged in the release's transaction."""
        query = self.store.query(request.query_id)
        if "min_reports" not in query.params:
            raise PolicyRefusal(
                "provisioned before the helper had a policy",
                f"query {request.query_id!r} was never checked against it; it is not released",
            )
        if query.aggregated != request.reports:
            raise FailedPrecondition(
                f"the helper aggregated {query.aggregated} reports, the leader "
                f"{request.reports}: the aggregators disagree, nothing is released"
            )
        sigma = sigma_of(query.params)
        if query.sealed_share is None:
            self.policy.check_release(query.aggregated, query.params["min_reports"])
            self.policy.check_collector(bytes.fromhex(query.params["collector_config"]))
        _, claims = self._claims(
            mechanism_of(query), query.params["targets"], sigma, query.params["min_reports"]
        )

        def charge(body: str | None) -> str:
            ledger = StoredLedger.from_body(body)
            try:
                ledger.ledger.charge(query.query_id, claims, iso_time(time.time()))
            except BudgetExceeded as error:
                raise PolicyRefusal("its own ledger, --budget-epsilon", str(error)) from None
            return ledger.to_body()

        sealed = self.store.release(
            request.query_id, lambda q: noised_sealed_share(q, ROLE_HELPER, sigma), charge
        )
        return apb.AggregateShareResponse(
            sealed_share=sealed, reports=query.aggregated, noise_sigma=sigma_text(sigma)
        )
