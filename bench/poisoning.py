"""Poisoning with and without admission: m compromised devices among N honest ones.

    .venv/bin/python -m bench.poisoning [--honest 2000] [--compromised 5,10,20,50] [--tokens 4]
                                        [--fake-per-device 100] [--trials 20] [--json]
                                        [--plot poisoning.png]

Each compromised device tries to send `--fake-per-device` fake reports (more than its quota)
that all push one target cell up: RR "yes" at the target; SP a fake device answering 0 in
round 1 and 1 in round 2 (two reports). Without admission every fake report counts (nothing
tells them from real devices). With admission the attackers are m enrolled identities at a real
`Issuer` (K tokens per epoch each, blind RSA, the core's code); each fake report carries one
of their tokens, tokens are verified (`check_tokens`) and a spent nonce refused (as the store
does), so at most K * m fake reports count. The estimates use the mechanisms' own estimators
over honest round counts drawn exactly in distribution; the shift is the estimate with the
attack minus the estimate of the same honest counts alone, its worst over `--trials` draws
and over attack strategies, printed beside the bound K * m / p (RR) or K * m / s (SP).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from rich.console import Console
from rich.table import Table

from ldpcollect.admission.errors import IssuanceRefused
from ldpcollect.admission.issuer import Issuer
from ldpcollect.admission.query_challenge import query_challenge
from ldpcollect.admission.tokens import TokenChallenge, finalize_token, request_token
from ldpcollect.admission.verification import Verdict, check_tokens
from ldpcollect.mechanisms import Mechanism, RandomizedResponse, SamplingPrivacy

console = Console(stderr=True)
ISSUER_NAME = "issuer.bench"
QUERY = "poisoning"


@dataclass
class Row:
    mechanism: str
    compromised: int
    tokens_per_device: int
    fake_devices_tried: int  # fake devices (one report per round each)
    fake_counted_without: int
    fake_counted_with: int
    worst_shift_without: float
    worst_shift_with: float
    bound_with: float  # K * m / p or K * m / s
    honest_std_error: float

    @property
    def within_bound(self) -> bool:
        return self.worst_shift_with <= self.bound_with + 1e-9


def admitted_fakes(issuer: Issuer, attackers: int, tries: int, rounds: int) -> int:
    """Fake devices whose every round carries a valid, unspent token: the attackers ask the
    real issuer for as many tokens as they want (one round's worth at a time), then send
    `tries` fake devices each, attaching tokens round-robin (reusing them when they run out)."""
    challenges = [query_challenge(ISSUER_NAME, QUERY, r) for r in range(1, rounds + 1)]
    spent: set[bytes] = set()
    admitted = 0
    for attacker in range(attackers):
        client = f"attacker-{attacker}"
        wallet: list[list[bytes]] = [[] for _ in challenges]
        while True:  # ask for one more fake device's tokens until the issuer refuses
            try:
                for r, challenge in enumerate(challenges):
                    wallet[r].append(_token(issuer, client, challenge))
            except IssuanceRefused:
                break
        for fake in range(tries):
            ok = True
            for r, challenge in enumerate(challenges):
                if not wallet[r]:
                    ok = False
                    break
                token = wallet[r][fake % len(wallet[r])]
                [verdict] = check_tokens(issuer.public_key, [token], challenge.digest())
                nonce = bytes([r]) + token[2:34]
                if verdict is not Verdict.VALID or nonce in spent:
                    ok = False  # refused: this round's report does not count, so neither
                    break  # does the fake device (an SP device counts only with both rounds)
                spent.add(nonce)
            admitted += ok
    return admitted


def _token(issuer: Issuer, client: str, challenge: TokenChallenge) -> bytes:
    request, pending = request_token(issuer.public_key, challenge)
    [response] = issuer.issue(client, [request])
    return finalize_token(pending, response).encode()


def worst_shift(
    mech: Mechanism, honest: int, true_count: int, fakes: int, trials: int, seed: int
) -> tuple[float, float]:
    """(worst shift of the target's estimate over trials and strategies, mean honest SE)."""
    rng = np.random.default_rng(seed)
    worst, errors = 0.0, []
    for _ in range(trials):
        counts = mech.sample_aggregate([true_count], honest, rng)
        alone = mech.estimate(counts, honest)
        errors.append(float(alone.std_error[0]))
        for attack in _attacks(mech, fakes, rng):
            attacked = mech.estimate(counts + attack, honest + fakes)
            worst = max(worst, float(attacked.estimate[0] - alone.estimate[0]))
    return worst, float(np.mean(errors))


def _attacks(mech: Mechanism, fakes: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Round counts the fake devices add at the target, per strategy: the extreme answers
    (always yes; SP: selected, 0 then 1), and posing as devices truly at the target."""
    if isinstance(mech, RandomizedResponse):
        posing = rng.binomial(fakes, float(mech.yes_given_yes))
        return [np.array([[fakes]]), np.array([[posing]])]
    selected = rng.binomial(fakes, float(mech.sampling_rate))
    round1 = rng.binomial(fakes - selected, 0.5)
    return [np.array([[0], [fakes]]), np.array([[round1], [round1 + selected]])]


def run(args: argparse.Namespace) -> list[Row]:
    rows: list[Row] = []
    mechanisms: list[tuple[Mechanism, float]] = [
        (RandomizedResponse("0.85", "0.3"), 0.85),
        (SamplingPrivacy("1/2"), 0.5),
    ]
    for mech, rate in mechanisms:
        for m in args.compromised:
            tried = m * args.fake_per_device
            issuer = Issuer(tokens_per_epoch=args.tokens)
            with_admission = admitted_fakes(issuer, m, args.fake_per_device, mech.rounds)
            without, se = worst_shift(
                mech, args.honest, args.true_count, tried, args.trials, args.seed
            )
            with_, _ = worst_shift(
                mech, args.honest, args.true_count, with_admission, args.trials, args.seed
            )
            rows.append(
                Row(
                    mech.name,
                    m,
                    args.tokens,
                    tried,
                    tried,
                    with_admission,
                    without,
                    with_,
                    args.tokens * m / rate,
                    se,
                )
            )
            console.log(f"{mech.name} m={m}: shift {without:,.0f} without, {with_:,.1f} with")
    return rows


def plot(rows: Sequence[Row], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=False)
    for ax, name in zip(axes, ("rr", "sp"), strict=True):
        mine = [r for r in rows if r.mechanism == name]
        ms = [r.compromised for r in mine]
        ax.plot(ms, [r.worst_shift_without for r in mine], "o-", label="without admission")
        ax.plot(ms, [r.worst_shift_with for r in mine], "s-", label="with admission (measured)")
        ax.plot(ms, [r.bound_with for r in mine], "k--", label="bound K·m/p or K·m/s")
        ax.plot(ms, [2 * r.honest_std_error for r in mine], ":", label="2 honest std errors")
        ax.set_yscale("log")
        ax.set_xlabel("compromised devices m")
        ax.set_title(f"{name.upper()}: worst shift of the target's estimate")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--honest", type=int, default=2000)
    parser.add_argument("--true-count", type=int, default=200)
    parser.add_argument(
        "--compromised", type=lambda t: [int(x) for x in t.split(",")], default=[5, 10, 20, 50]
    )
    parser.add_argument("--tokens", type=int, default=4, help="K per device per epoch")
    parser.add_argument("--fake-per-device", type=int, default=100)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--plot", default=None, help="write a PNG of the shifts here")
    args = parser.parse_args(argv)
    rows = run(args)
    if args.plot:
        plot(rows, args.plot)
    if args.json:
        print(json.dumps([asdict(r) | {"within_bound": r.within_bound} for r in rows], indent=1))
        return
    table = Table(title=f"poisoning one cell: N={args.honest} honest, K={args.tokens} tokens")
    for column in ("mech", "m", "fakes tried", "counted w/o", "counted with", "shift w/o",
                   "shift with", "bound", "honest SE"):  # fmt: skip
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            r.mechanism, str(r.compromised), f"{r.fake_devices_tried:,}",
            f"{r.fake_counted_without:,}", f"{r.fake_counted_with:,}",
            f"{r.worst_shift_without:,.1f}", f"{r.worst_shift_with:,.1f}",
            f"{r.bound_with:,.1f}", f"{r.honest_std_error:,.1f}",
        )  # fmt: skip
    Console().print(table)


if __name__ == "__main__":
    main()
