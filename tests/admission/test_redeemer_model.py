"""Redemption against a plain model: submissions mixing a token query and a plain one, each
report with no token, a fresh one, a spent one, one for another round or a forged one, and
retries of earlier reports. Each report's outcome and the counts must match the model, in
every submission (`Redeemer` over a real SQLite store, no network)."""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from cryptography.hazmat.primitives import hashes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aggregator.model import QuerySpec, SubmitResult
from aggregator.redemption import Redeemer, TokenKeys
from aggregator.rounds import ReportColumns
from aggregator.status_map import outcome_status
from aggregator.store.sqlite import SqliteStore
from ldpcollect.admission import blind_rsa
from ldpcollect.admission.directory import DirectoryKey, IssuerDirectory
from ldpcollect.admission.query_challenge import query_challenge
from ldpcollect.admission.token_key import TokenSigningKey
from ldpcollect.admission.tokens import Token, authenticator_input
from ldpcollect.mechanisms import RandomizedResponse

ISSUER = "issuer.test"
KEY = TokenSigningKey.generate()
RR = RandomizedResponse("0.85", "0.3")


def token(nonce: bytes, round_: int = 1, query_id: str = "t") -> bytes:
    digest = query_challenge(ISSUER, query_id, round_).digest()
    message = authenticator_input(nonce, digest, KEY.public.token_key_id)
    padding = blind_rsa.pss_padding(blind_rsa.PSS_DETERMINISTIC)
    signature = KEY.private_key.sign(message, padding, hashes.SHA384())
    return Token(nonce, digest, KEY.public.token_key_id, signature).encode()


KINDS = ("none", "fresh", "spent", "other_round", "forged", "retry")
step = st.lists(st.tuples(st.sampled_from(("t", "p")), st.sampled_from(KINDS)), max_size=6)


@dataclass
class Model:
    spent: dict[bytes, bytes] = field(default_factory=dict)  # nonce -> report id
    sent: list[tuple[str, bytes, bytes, bytes]] = field(default_factory=list)  # accepted
    counted: dict[str, int] = field(default_factory=lambda: {"t": 0, "p": 0})


def expected(model: Model, query: str, report_id: bytes, tok: bytes, kind: str) -> str:
    if query == "p":
        return "retry" if kind == "retry" else "accepted"
    if kind == "none":
        return grpc.StatusCode.UNAUTHENTICATED.name
    if kind in ("other_round", "forged"):
        return grpc.StatusCode.PERMISSION_DENIED.name
    nonce = tok[2:34]
    holder = model.spent.get(nonce)
    if holder is not None and holder != report_id:
        return grpc.StatusCode.ALREADY_EXISTS.name
    model.spent[nonce] = report_id
    return "retry" if kind == "retry" else "accepted"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=1, max_size=5))
def test_each_report_gets_the_models_outcome(steps: list[list[tuple[str, str]]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_scenario(Path(tmp), steps))


async def _scenario(tmp: Path, steps: list[list[tuple[str, str]]]) -> None:
    directory = tmp / "directory.json"
    uri = f"grpc://{ISSUER}/ldpcollect.v1.Issuer/IssueTokens"
    directory.write_text(IssuerDirectory(uri, (DirectoryKey(KEY.public),)).to_json())
    store = SqliteStore(tmp / "agg.db")
    await store.open()
    try:
        await store.create_query(QuerySpec("t", "", RR, "grid", (1,), 1, None, ISSUER), 0.0)
        await store.create_query(QuerySpec("p", "", RR, "grid", (1,), 1, None), 0.0)
        redeemer = Redeemer(store, TokenKeys(directory))
        model, serial = Model(), 0
        for submission in steps:
            columns, tokens, wanted = ReportColumns(), list[bytes](), list[str]()
            for query, kind in submission:
                serial += 1
                rid, pseudonym = serial.to_bytes(16, "big"), (10**6 + serial).to_bytes(16, "big")
                tok = b""
                if kind == "retry" and any(q == query for q, *_ in model.sent):
                    query, rid, pseudonym, tok = next(s for s in model.sent if s[0] == query)
                elif kind == "retry":
                    kind = "fresh"
                if kind == "fresh":
                    tok = token(serial.to_bytes(32, "big"))
                elif kind == "spent" and model.spent:
                    tok = token(next(iter(model.spent)))
                elif kind == "spent":
                    kind, tok = "fresh", token(serial.to_bytes(32, "big"))
                elif kind == "other_round":
                    tok = token(serial.to_bytes(32, "big"), round_=2)
                elif kind == "forged":
                    good = token(serial.to_bytes(32, "big"))
                    tok = good[:-1] + bytes([good[-1] ^ 1])
                if query == "p" and kind != "retry":
                    tok = b""
                outcome = expected(model, query, rid, tok, kind)
                if outcome == "accepted":
                    model.sent.append((query, rid, pseudonym, tok))
                    model.counted[query] += 1
                columns.query_ids.append(query)
                columns.rounds.append(1)
                columns.pseudonyms.append(pseudonym)
                columns.report_ids.append(rid)
                columns.answers.append(b"\x80")
                tokens.append(tok)
                wanted.append(outcome)
            result: SubmitResult = await redeemer.submit(columns, tokens.copy, store.submit)
            got = ["accepted"] * len(wanted)
            for index, refused in result.rejected:
                got[index] = outcome_status(refused).name
            assert result.duplicates == wanted.count("retry")
            assert [("accepted" if w == "retry" else w) for w in wanted] == got
            for query in ("t", "p"):
                info = store.query(query)
                assert info is not None and info.reports_per_round == (model.counted[query],)
    finally:
        await store.close()
