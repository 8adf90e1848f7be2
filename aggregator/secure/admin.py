"""Leader: the operator's steps (served as SecureAdmin by `services`, admin token checked
there): create a secure query (provisioned at the helper with a fresh verify key first), read
it, close it, collect."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from aggregator.errors import AlreadyExists, FailedPrecondition, Invalid, Unavailable
from aggregator.protoconv import ledger_to_proto
from aggregator.release import set_budget_function
from aggregator.secure.collect import collect_shares
from aggregator.secure.helper_client import HelperClient
from aggregator.secure.queries import query_message, secure_scheme
from aggregator.secure.store_api import SecureStoreApi
from aggregator.secure.token_check import SecureTokens, challenge_of
from ldpcollect.admission.errors import AdmissionError
from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import validate_targets
from ldpcollect.mechanisms.no_privacy import refuse_no_privacy
from ldpcollect.rational import parse_rational_text
from ldpcollect.release_noise import validate_noise_sigma
from ldpcollect.secure.query_vdaf import query_vdaf, upload_round, vdaf_kind
from ldpcollect.secure.sealing import HpkeConfig, HpkeKeyPair, SealingError
from ldpcollect.v1 import aggregation_pb2 as apb
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.vdaf.prio3 import VERIFY_KEY_SIZE
from ldpcollect.wire import (
    mechanism_from_proto,
    mechanism_to_proto,
    validate_description,
    validate_query_id,
)


class LeaderAdmin:
    def __init__(
        self,
        store: SecureStoreApi,
        key_pair: HpkeKeyPair,
        helper: HelperClient,
        tokens: SecureTokens | None = None,
        origin_name: str = "",
        require_budget: bool = False,
    ) -> None:
        self.store, self.key_pair, self.helper = store, key_pair, helper
        # Refuse releases while no budget is set, unless the ledger records an opt-out.
        self.require_budget = require_budget
        self.tokens = tokens or SecureTokens(None)
        self.origin_name = origin_name  # the leader's name in token challenges (host:port)
        self._collect = asyncio.Lock()  # one release at a time: the ledger's check holds

    def _token_params(
        self, query_id: str, kind: str, helper: apb.GetHpkeConfigResponse
    ) -> dict[str, Any]:
        """A token-requiring query's issuer and origins (leader, helper), once both
        aggregators accept the same issuer."""
        issuer = self.tokens.require_issuer("leader")
        if not helper.token_issuer:
            raise FailedPrecondition(
                "the helper accepts no tokens: start it with --token-directory (the same "
                "issuer's directory as the leader's)"
            )
        if helper.token_issuer != issuer:
            raise FailedPrecondition(
                f"the helper accepts tokens of {helper.token_issuer!r}, the leader of "
                f"{issuer!r}: give both aggregators the same --token-directory"
            )
        params = {"token_issuer": issuer, "token_origins": [self.origin_name, helper.origin_name]}
        try:
            challenge_of({**params, "vdaf": kind, "upload_round": upload_round(kind)}, query_id)
        except AdmissionError as error:
            raise FailedPrecondition(
                f"no token challenge for this query: {error} (set --origin-name on the leader "
                "and the helper to the names devices and the leader reach them by)"
            ) from None
        return params

    async def create(self, request: spb.CreateSecureQueryRequest) -> spb.SecureQuery:
        query_id = request.query_id or f"sq-{secrets.token_hex(6)}"
        validate_query_id(query_id)
        mechanism = mechanism_from_proto(request.mechanism)
        if not request.allow_no_privacy:
            refuse_no_privacy(mechanism)
        targets = list(validate_targets(request.targets))
        scheme = secure_scheme(request.location_scheme)
        for target in targets:
            scheme.validate_cell(target)
        validate_description(request.description)
        if request.min_reports < 1:
            raise ParameterError("min_reports", request.min_reports, "[1, 2**63)")
        if request.noise_sigma:
            validate_noise_sigma(
                parse_rational_text("noise_sigma", request.noise_sigma, "(0, inf)")
            )
        if not request.collector_hpke_config:
            raise Invalid(
                "the collector's HPKE config is required: aggregate shares are sealed to it"
            )
        try:
            HpkeConfig.decode(request.collector_hpke_config)
        except SealingError as error:
            raise Invalid(f"collector HPKE config: {error}") from None
        if await asyncio.to_thread(self.store.has_query, query_id):
            raise AlreadyExists(f"secure query {query_id!r} already exists")
        kind = vdaf_kind(mechanism.name)
        helper = await self.helper.hpke_config()
        helper_config = helper.hpke_config
        token_params = self._token_params(query_id, kind, helper) if request.require_tokens else {}
        try:
            HpkeConfig.decode(helper_config)
        except SealingError as error:
            raise Unavailable(f"the helper's HPKE config is malformed: {error}") from None
        verify_key = secrets.token_bytes(VERIFY_KEY_SIZE)
        # The helper checks the query against its own policy and refuses (the leader keeps
        # nothing then) or opts in, naming the noise it will add.
        provisioned = await self.helper.provision(
            apb.ProvisionQueryRequest(
                query_id=query_id,
                vdaf=kind,
                targets=len(targets),
                upload_round=upload_round(kind),
                verify_key=verify_key,
                collector_hpke_config=request.collector_hpke_config,
                noise_sigma=request.noise_sigma,
                token_issuer=token_params.get("token_issuer", ""),
                token_origins=token_params.get("token_origins", []),
                min_reports=request.min_reports,
                mechanism=mechanism_to_proto(mechanism),
            )
        )
        params = {
            "description": request.description,
            "mechanism": mechanism.name,
            "mechanism_params": mechanism.params(),
            "targets": targets,
            "scheme": scheme.describe(),
            "min_reports": request.min_reports,
            "noise_sigma": request.noise_sigma,
            "vdaf": kind,
            "upload_round": upload_round(kind),
            "leader_config": self.key_pair.config.encode().hex(),
            "helper_config": helper_config.hex(),
            "collector_config": request.collector_hpke_config.hex(),
            "helper_noise_sigma": provisioned.noise_sigma,
            **token_params,
        }
        vdaf = query_vdaf(kind, len(targets))
        empty = vdaf.encode_agg_share(vdaf.agg_init())
        query = await asyncio.to_thread(
            self.store.create_query, query_id, params, verify_key, empty
        )
        return query_message(query)

    async def get(self, query_id: str) -> spb.SecureQuery:
        return query_message(*await asyncio.to_thread(self.store.progress, query_id))

    async def list(self) -> spb.ListSecureQueriesResponse:
        progress = await asyncio.to_thread(self.store.all_progress)
        return spb.ListSecureQueriesResponse(
            queries=[query_message(query, pending) for query, pending in progress]
        )

    async def close(self, query_id: str) -> spb.SecureQuery:
        await asyncio.to_thread(self.store.close_query, query_id)
        return await self.get(query_id)

    async def collect(self, query_id: str) -> spb.CollectSharesResponse:
        async with self._collect:
            return await collect_shares(self.store, self.helper, query_id, self.require_budget)

    async def ledger(self) -> pb.Ledger:
        return ledger_to_proto(await asyncio.to_thread(self.store.ledger))

    async def set_budget(self, request: pb.SetBudgetRequest) -> pb.Ledger:
        update = set_budget_function(
            request.epsilon,
            request.delta,
            filter=request.filter,
            new_filter=request.new_filter,
            no_budget=request.no_budget,
        )
        async with self._collect:
            return ledger_to_proto(await asyncio.to_thread(self.store.update_ledger, update))
