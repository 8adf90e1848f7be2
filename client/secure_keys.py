"""Where a secure-mode device takes each aggregator's HPKE key from: the helper's from the
helper itself (its AggregatorKeys endpoint) or from a copy its operator publishes
(`DB.hpke-helper.config`, one hex line a device can ship pinned), never only from the
leader. The leader's copy (in GetSecureQuery) must be the same key, or the device refuses to
upload: a leader that handed out a key of its own could open the helper's shares too, and
then it would hold both shares of every answer."""

from __future__ import annotations

from pathlib import Path

import grpc

from client.channels import ClientIdentity, open_channel
from ldpcollect.errors import ParameterError
from ldpcollect.secure.key_file import read_public_config
from ldpcollect.secure.sealing import HpkeConfig, SealingError
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.v1 import secure_pb2_grpc as spb_grpc


class UntrustedAggregator(Exception):
    """A device refuses to upload: an aggregator's key cannot be trusted (missing,
    malformed, or not the key that aggregator publishes)."""


def fetch_aggregator_config(channel: grpc.Channel, role: str) -> spb.AggregatorConfig:
    """The config an aggregator publishes itself; UntrustedAggregator when it answers for
    another role or with a malformed config."""
    answer = spb_grpc.AggregatorKeysStub(channel).GetAggregatorConfig(
        spb.GetAggregatorConfigRequest(), timeout=30
    )
    if answer.role != role:
        raise UntrustedAggregator(
            f"the server asked for the {role}'s key says it is the {answer.role or '?'}: "
            f"point the device at the {role} itself"
        )
    try:
        HpkeConfig.decode(answer.hpke_config)
    except SealingError as error:
        raise UntrustedAggregator(f"the {role}'s own HPKE config is malformed: {error}") from None
    return answer


def fetch_helper_config(channel: grpc.Channel) -> HpkeConfig:
    """The helper's key, from the helper."""
    return HpkeConfig.decode(fetch_aggregator_config(channel, "helper").hpke_config)


def helper_config_of(
    helper: str | None,
    pinned: Path | None,
    tls_ca: Path | None = None,
    identity: ClientIdentity | None = None,
) -> HpkeConfig:
    """The helper's key from the helper at `helper` (host:port, TLS with `tls_ca`) or from
    the pinned file `pinned` (what the CLI's --helper / --helper-config give)."""
    if (helper is None) == (pinned is None):
        raise ParameterError(
            "--helper/--helper-config",
            (helper, pinned),
            "exactly one: the helper's HOST:PORT (its key is fetched from it) or the config "
            "file its operator publishes (DB.hpke-helper.config)",
            "a device takes the helper's key from the helper, never only from the leader",
        )
    if pinned is not None:
        return read_public_config(pinned)
    assert helper is not None
    with open_channel(helper, tls_ca, identity=identity) as channel:
        return fetch_helper_config(channel)


def describe(config: HpkeConfig) -> str:
    return f"config id {config.config_id}, key {config.public_key.hex()[:16]}..."


def check_helper_copy(leaders_copy: bytes, helper_config: HpkeConfig) -> None:
    """UntrustedAggregator unless the leader's copy of the helper's config is the helper's."""
    if leaders_copy == helper_config.encode():
        return
    try:
        shown = describe(HpkeConfig.decode(leaders_copy))
    except SealingError:
        shown = f"{len(leaders_copy)} bytes that are no config"
    raise UntrustedAggregator(
        "refusing to upload: the leader's copy of the helper's HPKE key "
        f"({shown}) is not the key the helper publishes ({describe(helper_config)}); a "
        "leader that substitutes the helper's key could open both shares of every answer"
    )
