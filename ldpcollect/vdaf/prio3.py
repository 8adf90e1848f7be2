"""Prio3 (draft section 7): a VDAF from an FLP. A client splits its encoded measurement and
proof(s) into additive shares, one per aggregator; the aggregators query their shares, add
the verifier shares up, and keep their output shares only if the proof checks out.

Aggregator 0 (the leader) receives its shares in full; every other aggregator (a helper)
receives a 32-byte seed from which it expands its shares. When the circuit needs joint
randomness, the client derives it from all measurement shares (Fiat-Shamir); each
aggregator recomputes its own part and the verifier message carries the seed they agree
on, so a client that lied about the parts is caught in `verify_next`.

The VDAF knows nothing about roles, transport or storage: every step is a pure function of
its inputs and the states are plain data, so a batched verifier can sit beside this one.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from ldpcollect.vdaf import native
from ldpcollect.vdaf.errors import MalformedShare, VdafError
from ldpcollect.vdaf.field import vec_add, vec_sub
from ldpcollect.vdaf.flp import Flp
from ldpcollect.vdaf.xof import SEED_SIZE, XofTurboShake128, format_dst

Measurement = TypeVar("Measurement")
AggResult = TypeVar("AggResult")

NONCE_SIZE = 16
VERIFY_KEY_SIZE = SEED_SIZE

USAGE_MEAS_SHARE = 1
USAGE_PROOF_SHARE = 2
USAGE_JOINT_RANDOMNESS = 3
USAGE_PROVE_RANDOMNESS = 4
USAGE_QUERY_RANDOMNESS = 5
USAGE_JOINT_RAND_SEED = 6
USAGE_JOINT_RAND_PART = 7


@dataclass(frozen=True)
class LeaderShare:
    """Aggregator 0's input share: its measurement share and proof share(s) in full."""

    meas_share: list[int]
    proofs_share: list[int]
    blind: bytes | None


@dataclass(frozen=True)
class HelperShare:
    """Another aggregator's input share: the seed its shares expand from."""

    seed: bytes
    blind: bytes | None


InputShare = LeaderShare | HelperShare
PublicShare = list[bytes] | None
"""The joint randomness parts, one per aggregator, or None when the circuit needs none."""


@dataclass(frozen=True)
class VerifyState:
    out_share: list[int]
    corrected_joint_rand_seed: bytes | None


@dataclass(frozen=True)
class VerifierShare:
    verifiers_share: list[int]
    joint_rand_part: bytes | None


VerifierMessage = bytes | None
"""The joint randomness seed the aggregators computed, or None without joint randomness."""


@dataclass(frozen=True)
class PreparedShare:
    """One aggregator's `verify_init` on encoded shares, kept encoded: the verifier share it
    sends (`encode_verifier_share`), the joint randomness seed it expects back (b"" without
    joint randomness) and its output share (`encode_agg_share` layout)."""

    verifier_share: bytes
    joint_rand_seed: bytes
    out_share: bytes


class Prio3(Generic[Measurement, AggResult]):
    """One Prio3 instance: an FLP, a VDAF id (for domain separation), the number of shares
    (aggregators) and of proofs."""

    rounds = 1
    nonce_size = NONCE_SIZE
    verify_key_size = VERIFY_KEY_SIZE

    def __init__(
        self, vdaf_id: int, flp: Flp[Measurement, AggResult], shares: int, proofs: int = 1
    ) -> None:
        if not 2 <= shares < 256:
            raise VdafError(f"shares must be in [2, 256), got {shares}")
        if not 1 <= proofs < 256:
            raise VdafError(f"proofs must be in [1, 256), got {proofs}")
        self.vdaf_id = vdaf_id
        self.flp = flp
        self.field = flp.field
        self.shares = shares
        self.proofs = proofs
        self.uses_joint_rand = flp.joint_rand_len > 0
        self.rand_size = SEED_SIZE * shares * (2 if self.uses_joint_rand else 1)
        self.kernel = native.prio3_kernel(
            vdaf_id, flp.valid.native_circuit(), flp.field, shares, proofs
        )
        """The compiled Prio3 behind the `*_encoded` methods, or None (this reference code)."""

    def reference(self) -> Prio3[Measurement, AggResult]:
        """This instance without its compiled kernel: every method runs the reference code."""
        plain = copy.copy(self)
        plain.kernel = None
        return plain

    # -- sharding (client) --------------------------------------------------------------

    def shard(
        self, ctx: bytes, measurement: Measurement, nonce: bytes, rand: bytes
    ) -> tuple[PublicShare, list[InputShare]]:
        """Split a measurement into a public share and one input share per aggregator.
        `rand` is `rand_size` fresh random bytes (the only randomness used)."""
        _check_size("nonce", nonce, NONCE_SIZE)
        _check_size("sharding randomness", rand, self.rand_size)
        seeds = [rand[i : i + SEED_SIZE] for i in range(0, self.rand_size, SEED_SIZE)]
        meas = self.flp.encode(measurement)
        helpers = self.shares - 1
        helper_blinds: list[bytes | None]
        leader_blind: bytes | None
        if self.uses_joint_rand:
            helper_seeds, helper_blinds = seeds[0 : 2 * helpers : 2], [*seeds[1 : 2 * helpers : 2]]
            leader_blind, prove_seed = seeds[2 * helpers], seeds[2 * helpers + 1]
        else:
            helper_seeds, helper_blinds = seeds[:helpers], [None] * helpers
            leader_blind, prove_seed = None, seeds[helpers]

        leader_meas = meas
        parts: list[bytes] = []
        for j, seed in enumerate(helper_seeds, start=1):
            helper_meas = self.helper_meas_share(ctx, j, seed)
            leader_meas = vec_sub(self.field, leader_meas, helper_meas)
            blind = helper_blinds[j - 1]
            if blind is not None:
                parts.append(self.joint_rand_part(ctx, j, blind, helper_meas, nonce))
        joint_rands: list[int] = []
        public_share: PublicShare = None
        if leader_blind is not None:
            parts.insert(0, self.joint_rand_part(ctx, 0, leader_blind, leader_meas, nonce))
            joint_rands = self.joint_rands(ctx, self.joint_rand_seed(ctx, parts))
            public_share = parts

        prove_rands = self.prove_rands(ctx, prove_seed)
        n_prove, n_joint = self.flp.prove_rand_len, self.flp.joint_rand_len
        leader_proofs: list[int] = []
        for i in range(self.proofs):
            leader_proofs += self.flp.prove(
                meas,
                prove_rands[i * n_prove : (i + 1) * n_prove],
                joint_rands[i * n_joint : (i + 1) * n_joint],
            )
        for j, seed in enumerate(helper_seeds, start=1):
            leader_proofs = vec_sub(
                self.field, leader_proofs, self.helper_proofs_share(ctx, j, seed)
            )

        input_shares: list[InputShare] = [LeaderShare(leader_meas, leader_proofs, leader_blind)]
        input_shares += [
            HelperShare(seed, blind)
            for seed, blind in zip(helper_seeds, helper_blinds, strict=True)
        ]
        return public_share, input_shares

    # -- verification (aggregators) -------------------------------------------------------

    def verify_init(
        self,
        verify_key: bytes,
        ctx: bytes,
        agg_id: int,
        nonce: bytes,
        public_share: PublicShare,
        input_share: InputShare,
    ) -> tuple[VerifyState, VerifierShare]:
        """Aggregator `agg_id` queries its shares: its state (the output share it will keep
        if all goes well) and the verifier share it sends to the others."""
        _check_size("verify key", verify_key, VERIFY_KEY_SIZE)
        _check_size("nonce", nonce, NONCE_SIZE)
        self._check_agg_id(agg_id)
        meas_share, proofs_share, blind = self.expand_input_share(ctx, agg_id, input_share)
        out_share = self.flp.truncate(meas_share)

        joint_rands: list[int] = []
        corrected_seed: bytes | None = None
        own_part: bytes | None = None
        if self.uses_joint_rand:
            if blind is None or public_share is None:
                raise VdafError("this VDAF needs a blind and a public share with joint rand parts")
            if len(public_share) != self.shares:
                raise VdafError(
                    f"the public share must hold {self.shares} parts, got {len(public_share)}"
                )
            own_part = self.joint_rand_part(ctx, agg_id, blind, meas_share, nonce)
            parts = list(public_share)
            parts[agg_id] = own_part
            corrected_seed = self.joint_rand_seed(ctx, parts)
            joint_rands = self.joint_rands(ctx, corrected_seed)
        elif public_share is not None:
            raise VdafError("this VDAF has an empty public share")

        query_rands = self.query_rands(verify_key, ctx, nonce)
        n_proof, n_query, n_joint = (
            self.flp.proof_len,
            self.flp.query_rand_len,
            self.flp.joint_rand_len,
        )
        verifiers_share: list[int] = []
        for i in range(self.proofs):
            verifiers_share += self.flp.query(
                meas_share,
                proofs_share[i * n_proof : (i + 1) * n_proof],
                query_rands[i * n_query : (i + 1) * n_query],
                joint_rands[i * n_joint : (i + 1) * n_joint],
                self.shares,
            )
        return VerifyState(out_share, corrected_seed), VerifierShare(verifiers_share, own_part)

    def verify_init_batch(
        self,
        verify_key: bytes,
        ctx: bytes,
        agg_id: int,
        reports: Iterable[tuple[bytes, PublicShare, InputShare]],
    ) -> list[tuple[VerifyState, VerifierShare] | VdafError]:
        """`verify_init` over many (nonce, public share, input share) reports; a rejected
        report yields its error in place. Callers go through this entry point so a vectorised
        implementation can replace the loop without changing them."""
        results: list[tuple[VerifyState, VerifierShare] | VdafError] = []
        for nonce, public_share, input_share in reports:
            try:
                results.append(
                    self.verify_init(verify_key, ctx, agg_id, nonce, public_share, input_share)
                )
            except VdafError as error:
                results.append(error)
        return results

    # -- encoded batches: the compiled path when there is one, else the reference --------

    def shard_encoded(
        self, ctx: bytes, measurement: Measurement, nonce: bytes, rand: bytes
    ) -> tuple[bytes, list[bytes]]:
        """`shard`, encoded: the public share and each aggregator's input share as bytes."""
        if self.kernel is None:
            public_share, input_shares = self.shard(ctx, measurement, nonce, rand)
            shares = [self.encode_input_share(share) for share in input_shares]
            return self.encode_public_share(public_share), shares
        encoded = self.flp.encode(measurement)
        if encoded and (min(encoded) < 0 or max(encoded) > 1):  # a lying encoder (tests)
            meas = self.field.encode_vec([x % self.field.modulus for x in encoded])
        else:
            meas = bytes(encoded)  # an honest encoding is 0/1: one byte each
        _check_size("nonce", nonce, NONCE_SIZE)
        _check_size("sharding randomness", rand, self.rand_size)
        return self.kernel.shard(ctx, meas, nonce, rand)

    def verify_init_encoded(
        self,
        verify_key: bytes,
        ctx: bytes,
        agg_id: int,
        reports: Sequence[tuple[bytes, bytes, bytes]],
    ) -> list[PreparedShare | VdafError]:
        """`verify_init` over many (nonce, encoded public share, encoded input share) reports
        of one context, in one call. A report whose shares do not decode yields a
        `MalformedShare`, one whose proof cannot be queried a `VdafError`, in place."""
        _check_size("verify key", verify_key, VERIFY_KEY_SIZE)
        self._check_agg_id(agg_id)
        if self.kernel is None:
            return [self._verify_init_one(verify_key, ctx, agg_id, *r) for r in reports]
        results: list[PreparedShare | VdafError] = []
        for item in self.kernel.prep_init_batch(
            verify_key,
            ctx,
            agg_id,
            [r[0] for r in reports],
            [r[1] for r in reports],
            [r[2] for r in reports],
        ):
            if len(item) == 3:
                results.append(PreparedShare(*item))
            else:
                kind, message = item
                results.append(MalformedShare(message) if kind == 1 else VdafError(message))
        return results

    def _verify_init_one(
        self, verify_key: bytes, ctx: bytes, agg_id: int, nonce: bytes, public: bytes, share: bytes
    ) -> PreparedShare | VdafError:
        try:
            _check_size("nonce", nonce, NONCE_SIZE)
            public_share = self.decode_public_share(public)
            input_share = self.decode_input_share(agg_id, share)
        except VdafError as error:
            return MalformedShare(str(error))
        try:
            state, verifier = self.verify_init(
                verify_key, ctx, agg_id, nonce, public_share, input_share
            )
        except VdafError as error:
            return error
        return PreparedShare(
            self.encode_verifier_share(verifier),
            state.corrected_joint_rand_seed or b"",
            self.encode_agg_share(state.out_share),
        )

    def verifier_messages_encoded(
        self, ctx: bytes, verifier_shares: Sequence[Sequence[bytes]]
    ) -> list[bytes | VdafError]:
        """Per report, every aggregator's encoded verifier share in, the encoded verifier
        message out (or why the proof failed), in one call."""
        if self.kernel is None:
            return [self._message_one(ctx, shares) for shares in verifier_shares]
        return [
            VdafError(item[1]) if isinstance(item, tuple) else item
            for item in self.kernel.shares_to_message_batch(ctx, verifier_shares)
        ]

    def _message_one(self, ctx: bytes, shares: Sequence[bytes]) -> bytes | VdafError:
        try:
            decoded = [self.decode_verifier_share(share) for share in shares]
            return self.encode_verifier_message(self.verifier_shares_to_message(ctx, decoded))
        except VdafError as error:
            return error

    def agg_encoded(self, out_shares: Sequence[bytes]) -> list[int]:
        """The aggregate share of encoded output shares (`PreparedShare.out_share`)."""
        if self.kernel is None:
            return self.agg_many(self.decode_agg_share(share) for share in out_shares)
        try:
            return self.decode_agg_share(self.kernel.agg_sum(out_shares))
        except ValueError as error:
            raise VdafError(str(error)) from None

    def verifier_shares_to_message(
        self, ctx: bytes, verifier_shares: Sequence[VerifierShare]
    ) -> VerifierMessage:
        """Add the verifier shares up and decide; raises if any proof fails. The result (the
        joint randomness seed from the aggregators' own parts) goes back to every aggregator."""
        if len(verifier_shares) != self.shares:
            raise VdafError(f"need {self.shares} verifier shares, got {len(verifier_shares)}")
        total = [0] * (self.flp.verifier_len * self.proofs)
        parts: list[bytes] = []
        for share in verifier_shares:
            total = vec_add(self.field, total, share.verifiers_share)
            if self.uses_joint_rand:
                if share.joint_rand_part is None:
                    raise VdafError("a verifier share lacks its joint randomness part")
                parts.append(share.joint_rand_part)
        n = self.flp.verifier_len
        for i in range(self.proofs):
            if not self.flp.decide(total[i * n : (i + 1) * n]):
                raise VdafError("proof verifier check failed")
        return self.joint_rand_seed(ctx, parts) if self.uses_joint_rand else None

    def verify_next(self, state: VerifyState, message: VerifierMessage) -> list[int]:
        """The output share, if the joint randomness the client used is the one the
        aggregators computed."""
        if message != state.corrected_joint_rand_seed:
            raise VdafError("joint randomness check failed")
        return state.out_share

    # -- aggregation and unsharding -------------------------------------------------------

    def agg_init(self) -> list[int]:
        return [0] * self.flp.output_len

    def agg_update(self, agg_share: Sequence[int], out_share: Sequence[int]) -> list[int]:
        return vec_add(self.field, agg_share, out_share)

    def agg_many(self, out_shares: Iterable[Sequence[int]]) -> list[int]:
        """The aggregate share of many output shares: `agg_update` over each, with one
        reduction per entry at the end instead of one per report."""
        p, total = self.field.modulus, self.agg_init()
        columns = list(zip(*out_shares, strict=True)) or [() for _ in total]
        if len(columns) != len(total):
            raise VdafError(f"output shares must have {len(total)} entries, got {len(columns)}")
        return [sum(column) % p for column in columns]

    def merge(self, agg_shares: Iterable[Sequence[int]]) -> list[int]:
        total = self.agg_init()
        for share in agg_shares:
            total = vec_add(self.field, total, share)
        return total

    def unshard(self, agg_shares: Iterable[Sequence[int]], num_measurements: int) -> AggResult:
        return self.flp.decode(self.merge(agg_shares), num_measurements)

    # -- encodings (draft section 7.2.7) --------------------------------------------------

    def encode_public_share(self, public_share: PublicShare) -> bytes:
        return b"".join(public_share) if public_share is not None else b""

    def decode_public_share(self, encoded: bytes) -> PublicShare:
        if not self.uses_joint_rand:
            _check_size("public share", encoded, 0)
            return None
        _check_size("public share", encoded, SEED_SIZE * self.shares)
        return [encoded[i : i + SEED_SIZE] for i in range(0, len(encoded), SEED_SIZE)]

    def encode_input_share(self, input_share: InputShare) -> bytes:
        blind = input_share.blind or b""
        if isinstance(input_share, LeaderShare):
            vec = input_share.meas_share + input_share.proofs_share
            return self.field.encode_vec(vec) + blind
        return input_share.seed + blind

    def decode_input_share(self, agg_id: int, encoded: bytes) -> InputShare:
        self._check_agg_id(agg_id)
        blind_size = SEED_SIZE if self.uses_joint_rand else 0
        if agg_id > 0:
            _check_size(f"helper {agg_id}'s input share", encoded, SEED_SIZE + blind_size)
            return HelperShare(encoded[:SEED_SIZE], encoded[SEED_SIZE:] or None)
        meas_len = self.flp.meas_len
        vec_len = meas_len + self.flp.proof_len * self.proofs
        vec_size = vec_len * self.field.encoded_size
        _check_size("the leader's input share", encoded, vec_size + blind_size)
        vec = self.field.decode_vec(encoded[:vec_size])
        return LeaderShare(vec[:meas_len], vec[meas_len:], encoded[vec_size:] or None)

    def check_input_share(self, agg_id: int, encoded: bytes) -> None:
        """`decode_input_share`'s checks (size, every element below the modulus), raising
        the same errors, without building the elements."""
        if agg_id != 0 or self.kernel is None:
            self.decode_input_share(agg_id, encoded)
            return
        blind_size = SEED_SIZE if self.uses_joint_rand else 0
        vec_size = (self.flp.meas_len + self.flp.proof_len * self.proofs) * self.field.encoded_size
        _check_size("the leader's input share", encoded, vec_size + blind_size)
        if not native.in_range(self.field, encoded[:vec_size]):
            raise VdafError(f"an encoded element is not below the {self.field.name} modulus")

    def encode_verifier_share(self, share: VerifierShare) -> bytes:
        return self.field.encode_vec(share.verifiers_share) + (share.joint_rand_part or b"")

    def decode_verifier_share(self, encoded: bytes) -> VerifierShare:
        vec_size = self.flp.verifier_len * self.proofs * self.field.encoded_size
        part_size = SEED_SIZE if self.uses_joint_rand else 0
        _check_size("verifier share", encoded, vec_size + part_size)
        return VerifierShare(self.field.decode_vec(encoded[:vec_size]), encoded[vec_size:] or None)

    def encode_verifier_message(self, message: VerifierMessage) -> bytes:
        return message or b""

    def decode_verifier_message(self, encoded: bytes) -> VerifierMessage:
        _check_size("verifier message", encoded, SEED_SIZE if self.uses_joint_rand else 0)
        return encoded or None

    def encode_agg_share(self, agg_share: Sequence[int]) -> bytes:
        return self.field.encode_vec(agg_share)

    def decode_agg_share(self, encoded: bytes) -> list[int]:
        return self.field.decode_vec_of_length(encoded, self.flp.output_len, "aggregate share")

    # -- auxiliary functions (draft section 7.2.6), public for batched and staged callers --

    def domain_separation_tag(self, usage: int, ctx: bytes) -> bytes:
        return format_dst(0, self.vdaf_id, usage) + ctx

    def _check_agg_id(self, agg_id: int) -> None:
        if not 0 <= agg_id < self.shares:
            raise VdafError(f"aggregator id must be in [0, {self.shares}), got {agg_id}")

    def expand_input_share(
        self, ctx: bytes, agg_id: int, input_share: InputShare
    ) -> tuple[list[int], list[int], bytes | None]:
        if agg_id == 0:
            if not isinstance(input_share, LeaderShare):
                raise VdafError("aggregator 0 needs the leader's input share")
            return input_share.meas_share, input_share.proofs_share, input_share.blind
        if not isinstance(input_share, HelperShare):
            raise VdafError(f"aggregator {agg_id} needs a helper's input share")
        return (
            self.helper_meas_share(ctx, agg_id, input_share.seed),
            self.helper_proofs_share(ctx, agg_id, input_share.seed),
            input_share.blind,
        )

    def helper_meas_share(self, ctx: bytes, agg_id: int, seed: bytes) -> list[int]:
        return XofTurboShake128.expand_into_vec(
            self.field,
            seed,
            self.domain_separation_tag(USAGE_MEAS_SHARE, ctx),
            bytes([agg_id]),
            self.flp.meas_len,
        )

    def helper_proofs_share(self, ctx: bytes, agg_id: int, seed: bytes) -> list[int]:
        return XofTurboShake128.expand_into_vec(
            self.field,
            seed,
            self.domain_separation_tag(USAGE_PROOF_SHARE, ctx),
            bytes([self.proofs, agg_id]),
            self.flp.proof_len * self.proofs,
        )

    def prove_rands(self, ctx: bytes, prove_seed: bytes) -> list[int]:
        return XofTurboShake128.expand_into_vec(
            self.field,
            prove_seed,
            self.domain_separation_tag(USAGE_PROVE_RANDOMNESS, ctx),
            bytes([self.proofs]),
            self.flp.prove_rand_len * self.proofs,
        )

    def query_rands(self, verify_key: bytes, ctx: bytes, nonce: bytes) -> list[int]:
        return XofTurboShake128.expand_into_vec(
            self.field,
            verify_key,
            self.domain_separation_tag(USAGE_QUERY_RANDOMNESS, ctx),
            bytes([self.proofs]) + nonce,
            self.flp.query_rand_len * self.proofs,
        )

    def joint_rand_part(
        self, ctx: bytes, agg_id: int, blind: bytes, meas_share: Sequence[int], nonce: bytes
    ) -> bytes:
        return XofTurboShake128.derive_seed(
            blind,
            self.domain_separation_tag(USAGE_JOINT_RAND_PART, ctx),
            bytes([agg_id]) + nonce + self.field.encode_vec(meas_share),
        )

    def joint_rand_seed(self, ctx: bytes, parts: Sequence[bytes]) -> bytes:
        return XofTurboShake128.derive_seed(
            bytes(SEED_SIZE),
            self.domain_separation_tag(USAGE_JOINT_RAND_SEED, ctx),
            b"".join(parts),
        )

    def joint_rands(self, ctx: bytes, seed: bytes) -> list[int]:
        return XofTurboShake128.expand_into_vec(
            self.field,
            seed,
            self.domain_separation_tag(USAGE_JOINT_RANDOMNESS, ctx),
            bytes([self.proofs]),
            self.flp.joint_rand_len * self.proofs,
        )


def _check_size(what: str, data: bytes, expected: int) -> None:
    if len(data) != expected:
        raise VdafError(f"{what} must be {expected} bytes, got {len(data)}")
