"""Both roles: AggregatorKeys, each aggregator's own HPKE config served by that aggregator
(no token), so a device takes the helper's key from the helper and not from the leader. The
helper's answer also states its policy's minimum batch and noise floor, for audit."""

from __future__ import annotations

from typing import Any

import grpc

from aggregator.secure.helper_policy import HelperPolicy
from ldpcollect.secure.sealing import HpkeConfig
from ldpcollect.secure.share_binding import sigma_text
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.v1 import secure_pb2_grpc as spb_grpc


class AggregatorKeysService(spb_grpc.AggregatorKeysServicer):
    def __init__(self, role: str, config: HpkeConfig, policy: HelperPolicy | None) -> None:
        answer = spb.AggregatorConfig(hpke_config=config.encode(), role=role)
        if policy is not None:
            answer.min_batch = policy.min_batch
            answer.min_noise_sigma = sigma_text(policy.min_noise_sigma)
        self._answer = answer

    async def GetAggregatorConfig(
        self,
        request: spb.GetAggregatorConfigRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> spb.AggregatorConfig:
        return self._answer
