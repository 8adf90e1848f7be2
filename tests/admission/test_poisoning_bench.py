"""The poisoning experiment's admission half: the real issuer lets m attackers count at most
K * m fake devices, and the measured shift stays within K * m / p (RR) or K * m / s (SP)."""

from __future__ import annotations

from bench.poisoning import admitted_fakes, main, run
from ldpcollect.admission.issuer import Issuer


def test_attackers_asking_for_more_tokens_than_their_quota_count_k_per_device() -> None:
    assert admitted_fakes(Issuer(tokens_per_epoch=3), attackers=2, tries=10, rounds=1) == 6
    # Two rounds: a fake device needs a token for each, so K = 3 makes one per attacker.
    assert admitted_fakes(Issuer(tokens_per_epoch=3), attackers=2, tries=10, rounds=2) == 2


def test_the_measured_shift_with_admission_is_within_the_bound(capsys: object) -> None:
    import argparse

    args = argparse.Namespace(
        honest=500, true_count=50, compromised=[2], tokens=2, fake_per_device=20, trials=3,
        seed=1, json=True, plot=None,
    )  # fmt: skip
    rows = run(args)
    assert [r.mechanism for r in rows] == ["rr", "sp"]
    for row in rows:
        assert row.fake_counted_with <= row.tokens_per_device * row.compromised
        assert row.within_bound
        assert row.worst_shift_without >= 5 * row.worst_shift_with
    main(["--honest", "300", "--compromised", "1", "--tokens", "1", "--fake-per-device", "3",
          "--trials", "1", "--json"])  # fmt: skip
