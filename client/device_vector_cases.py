"""The device conformance vectors' cases (client.device_vectors computes them): which
locations, queries and forced random bytes each covers, and the files they make."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from client.device_vectors import (
    COLLECTOR_KEY,
    FORMAT,
    HELPER_KEY,
    HELPER_ORIGIN,
    ISSUER_NAME,
    LEADER_KEY,
    LEADER_ORIGIN,
    compute,
    derived,
    issuer_inputs,
    token_inputs,
)
from client.query_info import QueryInfo
from ldpcollect import bits, wire
from ldpcollect.geo import grid, h3cells
from ldpcollect.randomness import ScriptedRandom
from ldpcollect.secure.query_vdaf import query_vdaf
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import secure_pb2 as spb

# -- the cases ---------------------------------------------------------------------------


def rr_spec(flip1: str, flip2: str) -> pb.MechanismSpec:
    return pb.MechanismSpec(randomized_response=pb.RandomizedResponse(flip1=flip1, flip2=flip2))


def sp_spec(rate: str) -> pb.MechanismSpec:
    return pb.MechanismSpec(sampling_privacy=pb.SamplingPrivacy(sampling_rate=rate))


GRID = pb.LocationScheme(grid=pb.GridScheme())


def h3_scheme(resolution: int) -> pb.LocationScheme:
    return pb.LocationScheme(h3=pb.H3Scheme(resolution=resolution))


def grid_block(cell: int, radius: int = 1) -> list[int]:
    """The (2 radius + 1)^2 grid cells around `cell`, row-major."""
    row, col = divmod(cell, grid.CELLS_PER_SIDE)
    return [
        r * grid.CELLS_PER_SIDE + c
        for r in range(row - radius, row + radius + 1)
        for c in range(col - radius, col + radius + 1)
    ]


@dataclass
class Case:
    """One vector's definition: what is fixed by hand; the rest is derived or computed."""

    name: str
    description: str
    mechanism: pb.MechanismSpec
    scheme: pb.LocationScheme
    lat: float
    lon: float
    targets: list[int]
    secure: bool = False
    tokens: bool = False
    # Bytes the draw takes after round 1's packed bytes (SP) or first (RR), chosen to force
    # an outcome (a selection, a rejected read); derived bytes follow them.
    draw_prefix: bytes = b""
    sp_round1: bool = field(default=False)


def _scheme_text(scheme: pb.LocationScheme) -> str:
    return wire.scheme_to_text(scheme)


def trusted_query(case: Case) -> pb.Query:
    rounds = 2 if case.mechanism.WhichOneof("mechanism") == "sampling_privacy" else 1
    return pb.Query(
        query_id=f"vec-{case.name}",
        description=case.description,
        mechanism=case.mechanism,
        location_scheme=case.scheme,
        targets=case.targets,
        rounds=rounds,
        current_round=1,
        state=pb.QUERY_STATE_OPEN,
        min_reports=100,
        require_tokens=case.tokens,
        token_issuer=ISSUER_NAME if case.tokens else "",
    )


def secure_query(case: Case) -> spb.SecureQuery:
    sp = case.mechanism.WhichOneof("mechanism") == "sampling_privacy"
    return spb.SecureQuery(
        query_id=f"vec-{case.name}",
        description=case.description,
        mechanism=case.mechanism,
        targets=case.targets,
        min_reports=100,
        leader_hpke_config=LEADER_KEY.config.encode(),
        helper_hpke_config=HELPER_KEY.config.encode(),
        collector_hpke_config=COLLECTOR_KEY.config.encode(),
        state=spb.SECURE_QUERY_STATE_OPEN,
        upload_round=2 if sp else 1,
        require_tokens=case.tokens,
        token_issuer=ISSUER_NAME if case.tokens else "",
        token_origins=[LEADER_ORIGIN, HELPER_ORIGIN] if case.tokens else [],
    )


def _draw_bytes(case: Case, compute_once: Callable[[bytes], int]) -> bytes:
    """The draw's bytes: round 1's packed bytes for SP, the forced prefix, then derived
    bytes, cut to exactly what the draw reads."""
    n_bytes = bits.packed_length(len(case.targets))
    head = derived(f"{case.name} round 1", n_bytes) if case.sp_round1 else b""
    stream = head + case.draw_prefix + derived(f"{case.name} draw", 4 * len(case.targets) + 64)
    return stream[: compute_once(stream)]


def _used_by_draw(case: Case, stream: bytes) -> int:
    query = trusted_query(case)
    info = QueryInfo.from_proto(query)
    source = ScriptedRandom(stream)
    info.mechanism.draw(info.locate(case.lat, case.lon), info.targets, source)
    return source.used


def make_vector(case: Case) -> dict[str, Any]:
    draw = _draw_bytes(case, lambda stream: _used_by_draw(case, stream))
    rounds = 2 if case.mechanism.WhichOneof("mechanism") == "sampling_privacy" else 1
    inputs: dict[str, Any] = {"location": {"lat": case.lat, "lon": case.lon}}
    if case.secure:
        query = secure_query(case)
        inputs["query"] = query.SerializeToString().hex()
        inputs["scheme"] = _scheme_text(case.scheme)
        inputs["helper_hpke_config"] = HELPER_KEY.config.encode().hex()
        vdaf = query_vdaf("sampling_pair" if rounds == 2 else "round", len(case.targets))
        inputs["random"] = {
            "draw": draw.hex(),
            "report_id": derived(f"{case.name} report id", 16).hex(),
            "vdaf_rand": derived(f"{case.name} vdaf rand", vdaf.rand_size).hex(),
            "hpke_ikm_e": {
                "leader": derived(f"{case.name} ikm leader", 32).hex(),
                "helper": derived(f"{case.name} ikm helper", 32).hex(),
            },
        }
        if case.tokens:
            inputs["issuer"] = issuer_inputs()
            inputs["token"] = token_inputs(case.name, 1)[0]
    else:
        inputs["query"] = trusted_query(case).SerializeToString().hex()
        inputs["random"] = {
            "draw": draw.hex(),
            "pseudonym": derived(f"{case.name} pseudonym", 16).hex(),
            "report_ids": [
                derived(f"{case.name} report id {r}", 16).hex() for r in range(1, rounds + 1)
            ],
        }
        if case.tokens:
            inputs["issuer"] = issuer_inputs()
            inputs["tokens"] = token_inputs(case.name, rounds)
    vector: dict[str, Any] = {
        "format": FORMAT,
        "name": case.name,
        "description": case.description,
        "mode": "secure" if case.secure else "trusted",
        "inputs": inputs,
    }
    vector["expected"] = compute(vector)
    return vector


PARIS = (48.8584, 2.2945)
NYC = (40.7484, -73.9857)


def _grid_cell(lat: float, lon: float) -> int:
    return grid.DEFAULT_GRID.locate(lat, lon)


def _row_edge_lat(row: int) -> float:
    """A latitude on the south edge of grid row `row`, as the grid computes edges."""
    return grid.DEFAULT_GRID.origin_lat + (row - grid.CELLS_PER_SIDE / 2) * grid.ROW_DEGREES


def _col_edge_lon(col: int) -> float:
    return (
        grid.DEFAULT_GRID.origin_lon
        + (col - grid.CELLS_PER_SIDE / 2) * grid.DEFAULT_GRID.col_degrees
    )


def cases() -> list[Case]:
    paris = _grid_cell(*PARIS)
    row, col = divmod(paris, grid.CELLS_PER_SIDE)
    edge_lat, edge_lon = _row_edge_lat(row + 1), _col_edge_lon(col + 1)
    nyc = h3cells.locate(*NYC, 9)
    vertex_cell = h3cells.locate(51.5007, -0.1246, 7)
    vertex = h3cells.boundary(vertex_cell)[0]
    fiji = h3cells.locate(-16.5, 180.0, 5)
    pole = _grid_cell(90.0, 0.0)
    selected, not_selected = b"\x00", b"\xff\x80\x40"  # s = 1/2: read 2 bits; 3, 2 rejected
    return [
        Case(
            "trusted-rr-grid",
            "RR 0.85/0.3 on the grid, 9 targets around the device (padding bits)",
            rr_spec("0.85", "0.3"),
            GRID,
            *PARIS,
            grid_block(paris),
        ),
        Case(
            "trusted-rr-grid-row-edge",
            "a latitude exactly on a row's south edge: floor puts it in that row",
            rr_spec("17/20", "3/10"),
            GRID,
            edge_lat,
            PARIS[1],
            grid_block(paris),
        ),
        Case(
            "trusted-rr-grid-col-edge",
            "a longitude exactly on a column's west edge",
            rr_spec("17/20", "3/10"),
            GRID,
            PARIS[0],
            edge_lon,
            grid_block(paris),
        ),
        Case(
            "trusted-rr-grid-outside",
            "a point outside the grid (the antimeridian): cell 2^64-1, No everywhere",
            rr_spec("3/4", "1/2"),
            GRID,
            -16.5,
            180.0,
            grid_block(paris),
        ),
        Case(
            "trusted-rr-grid-pole",
            "the north pole: longitude replaced by the origin's",
            rr_spec("3/4", "1/2"),
            GRID,
            90.0,
            123.0,
            grid_block(pole),
        ),
        Case(
            "trusted-rr-grid-flip2-zero",
            "flip2 0: a0 = 0 reads no bytes for the other targets",
            rr_spec("0.5", "0"),
            GRID,
            *PARIS,
            grid_block(paris),
        ),
        Case(
            "trusted-rr-h3-9",
            "RR on H3 resolution 9, the device's cell and its 6 neighbours",
            rr_spec("0.85", "0.3"),
            h3_scheme(9),
            *NYC,
            list(h3cells.targets_in_disk(nyc, 1)),
        ),
        Case(
            "trusted-rr-h3-vertex",
            "a point on an H3 cell's vertex (resolution 7): h3's own rule decides",
            rr_spec("0.85", "0.3"),
            h3_scheme(7),
            vertex[0],
            vertex[1],
            list(h3cells.targets_in_disk(vertex_cell, 1)),
        ),
        Case(
            "trusted-rr-h3-antimeridian-east",
            "lon +180 at resolution 5",
            rr_spec("0.85", "0.3"),
            h3_scheme(5),
            -16.5,
            180.0,
            list(h3cells.targets_in_disk(fiji, 1)),
        ),
        Case(
            "trusted-rr-h3-antimeridian-west",
            "lon -180: the same cell as +180",
            rr_spec("0.85", "0.3"),
            h3_scheme(5),
            -16.5,
            -180.0,
            list(h3cells.targets_in_disk(fiji, 1)),
        ),
        Case(
            "trusted-sp-grid-selected",
            "SP 1/2 on the grid: selected at its cell (round 1 bit 0, round 2 bit 1)",
            sp_spec("1/2"),
            GRID,
            *PARIS,
            grid_block(paris),
            draw_prefix=selected,
            sp_round1=True,
        ),
        Case(
            "trusted-sp-h3-not-selected",
            "SP 1/2 on H3: two reads rejected, then not selected (rounds equal)",
            sp_spec("0.5"),
            h3_scheme(9),
            *NYC,
            list(h3cells.targets_in_disk(nyc, 1)),
            draw_prefix=not_selected,
            sp_round1=True,
        ),
        Case(
            "trusted-sp-grid-not-at-target",
            "SP with the device at no target: no selection read",
            sp_spec("1/4"),
            GRID,
            *PARIS,
            grid_block(paris + 5 * grid.CELLS_PER_SIDE),
            sp_round1=True,
        ),
        Case(
            "trusted-rr-grid-tokens",
            "RR with admission tokens",
            rr_spec("0.85", "0.3"),
            GRID,
            *PARIS,
            grid_block(paris),
            tokens=True,
        ),
        Case(
            "trusted-sp-h3-tokens",
            "SP with admission tokens: one per round",
            sp_spec("1/2"),
            h3_scheme(9),
            *NYC,
            list(h3cells.targets_in_disk(nyc, 1)),
            tokens=True,
            draw_prefix=selected,
            sp_round1=True,
        ),
        Case(
            "secure-rr-grid",
            "two aggregators, RR: Prio3SumVec over 9 bits, sealed to leader and helper",
            rr_spec("0.85", "0.3"),
            GRID,
            *PARIS,
            grid_block(paris),
            secure=True,
        ),
        Case(
            "secure-rr-h3-wide",
            "two aggregators, RR over 37 H3 cells (chunk length 6)",
            rr_spec("3/4", "1/2"),
            h3_scheme(9),
            *NYC,
            list(h3cells.targets_in_disk(nyc, 3)),
            secure=True,
        ),
        Case(
            "secure-sp-grid-selected",
            "two aggregators, SP: the round pair report, selected",
            sp_spec("1/2"),
            GRID,
            *PARIS,
            grid_block(paris),
            secure=True,
            draw_prefix=selected,
            sp_round1=True,
        ),
        Case(
            "secure-sp-h3-not-selected",
            "two aggregators, SP pair, not selected",
            sp_spec("1/2"),
            h3_scheme(9),
            *NYC,
            list(h3cells.targets_in_disk(nyc, 1)),
            secure=True,
            draw_prefix=not_selected,
            sp_round1=True,
        ),
        Case(
            "secure-rr-grid-tokens",
            "two aggregators, RR, with an admission token naming both",
            rr_spec("0.85", "0.3"),
            GRID,
            *PARIS,
            grid_block(paris),
            secure=True,
            tokens=True,
        ),
    ]
