"""Per-epoch keys and quota of the issuer role, with a clock the test moves."""

from __future__ import annotations

from pathlib import Path

import pytest

from aggregator.issuer.epoch_keys import EpochKeys
from aggregator.issuer.quota import QuotaLedger
from ldpcollect.admission.errors import IssuanceRefused


def test_each_epoch_has_its_own_key_and_the_directory_keeps_the_previous_one(
    tmp_path: Path,
) -> None:
    now = [1_000.0]
    keys = EpochKeys(tmp_path, 100.0, lambda: now[0])
    assert keys.epoch_now() == 10
    first = keys.key(10).public
    assert keys.directory("issuer.test", 10).token_keys[0].token_key == first
    now[0] = 1_100.0
    assert keys.epoch_now() == 11
    second = keys.key(11).public
    assert second.token_key_id != first.token_key_id
    assert second.truncated_token_key_id != first.truncated_token_key_id
    listed = [k.token_key for k in keys.directory("issuer.test", 11).token_keys]
    assert listed == [second, first]  # devices take the first; aggregators accept both
    # Another process (a restart) reads the same keys from disk.
    again = EpochKeys(tmp_path, 100.0, lambda: now[0])
    assert again.key(10).public == first and again.key(11).public == second


def test_the_quota_is_per_device_and_epoch_and_refusals_count_nothing(tmp_path: Path) -> None:
    quota = QuotaLedger(tmp_path / "q.sqlite", tokens_per_epoch=2)
    assert quota.reserve(1, "a", 2) == 0
    with pytest.raises(IssuanceRefused, match="0 of 2 left in epoch 1"):
        quota.reserve(1, "a", 1)
    assert quota.issued(1, "a") == 2
    assert quota.reserve(2, "a", 1) == 1  # a new epoch fills the quota again
    assert quota.reserve(1, "b", 1) == 1
    quota.give_back(1, "a", 1)
    assert quota.issued(1, "a") == 1
    quota.close()
    assert QuotaLedger(tmp_path / "q.sqlite", tokens_per_epoch=2).issued(2, "a") == 1
