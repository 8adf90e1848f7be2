"""A release as maps, exports and tables see it: one row per target cell with its shape.

Built from the release's JSON (`ldpcollect release --json`, live or saved to a file), so a map
drawn later from a saved file is the same as one drawn at release time. The truth can be added
when the run knows it (the fleet runner's `--json` output has `ground_truth`), and a
post-processed estimate (`ldpcollect.postprocess`, free for privacy) as an extra column.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ldpcollect import geo, postprocess
from ldpcollect.errors import ParameterError
from ldpcollect.privacy_headline import release_headline


@dataclass(frozen=True)
class CellRow:
    """One target cell of a release."""

    cell: int
    estimate: float
    std_error: float
    ci_low: float
    ci_high: float
    participants: int
    truth: int | None = None
    adjusted: float | None = None  # the post-processed estimate, when asked for

    @property
    def interval_width(self) -> float:
        return self.ci_high - self.ci_low


@dataclass(frozen=True)
class ReleaseView:
    query_id: str
    scheme: geo.LocationScheme
    mechanism: str  # e.g. "sp sampling_rate=1/2, noise sigma 2"
    privacy: str  # the public view's cost in one line
    participants: int
    rows: tuple[CellRow, ...]
    postprocess: str | None = None

    @property
    def has_truth(self) -> bool:
        return any(r.truth is not None for r in self.rows)

    def cell_json(self, cell: int) -> int | str:
        return self.scheme.cell_json(cell)

    def cell_text(self, cell: int) -> str:
        return str(self.scheme.cell_json(cell))

    @classmethod
    def from_json(cls, data: Mapping[str, object], source: str = "release") -> ReleaseView:
        """From `release_json(release, query)`; ParameterError naming what is missing."""
        saved = "a release saved by `ldpcollect release --json`"
        scheme_text = data.get("scheme")
        estimates = data.get("estimates")
        if not isinstance(estimates, list) or not estimates:
            raise ParameterError(source, sorted(data)[:8], saved, "no estimates")
        if not isinstance(scheme_text, str):
            raise ParameterError(source, sorted(data)[:8], saved, "no location scheme")
        scheme = geo.scheme_from_text(scheme_text)
        rows = tuple(_row(scheme, e, source) for e in estimates)
        return cls(
            query_id=str(data.get("query_id", "")),
            scheme=scheme,
            mechanism=_mechanism_words(data),
            privacy=_privacy_words(data.get("claims")),
            participants=int(_number(data.get("participants", 0), source, "participants")),
            rows=rows,
        )

    @classmethod
    def from_file(cls, path: Path) -> ReleaseView:
        return cls.from_json(_read_json(path, "--from-json"), f"--from-json {path}")

    def with_truth(self, truth: Mapping[int, int]) -> ReleaseView:
        """The same release with each cell's true count (cells not in `truth` keep none)."""
        rows = tuple(replace(r, truth=truth.get(r.cell)) for r in self.rows)
        return replace(self, rows=rows)

    def with_postprocess(self, method: str | None) -> ReleaseView:
        """The same release with `adjusted` = the post-processed estimates (None: none)."""
        if method is None:
            return self
        adjusted = postprocess.apply(method, [r.estimate for r in self.rows])
        rows = tuple(
            replace(r, adjusted=float(a)) for r, a in zip(self.rows, adjusted, strict=True)
        )
        return replace(self, rows=rows, postprocess=method)

    def errors(self) -> dict[str, float] | None:
        """RMSE and mean absolute error against the truth, released and post-processed; None
        without truth."""
        known = [r for r in self.rows if r.truth is not None]
        if not known:
            return None
        result = {
            "rmse": _rmse([r.estimate - (r.truth or 0) for r in known]),
            "mae": sum(abs(r.estimate - (r.truth or 0)) for r in known) / len(known),
        }
        if self.postprocess is not None:
            diffs = [(r.adjusted or 0.0) - (r.truth or 0) for r in known]
            result[f"rmse_{self.postprocess}"] = _rmse(diffs)
            result[f"mae_{self.postprocess}"] = sum(abs(d) for d in diffs) / len(known)
        return result


def read_truth_file(path: Path) -> list[tuple[str, int]]:
    """(location id as written, true count) from `ldpcollect fleet run --json` output
    (`ground_truth`). Read before anything is released, so a bad file changes nothing."""
    data = _read_json(path, "--truth")
    entries = data.get("ground_truth")
    if not isinstance(entries, list):
        raise ParameterError(
            "--truth", str(path), "the output of `ldpcollect fleet run --json`", "no ground_truth"
        )
    truth: list[tuple[str, int]] = []
    for entry in entries:
        if not isinstance(entry, Mapping) or "location_id" not in entry:
            raise ParameterError("--truth", str(path), "ground_truth entries with location_id")
        count = int(_number(entry.get("true_count"), f"--truth {path}", "true_count"))
        truth.append((str(entry["location_id"]), count))
    return truth


def check_truth_query(path: Path, query_id: str) -> None:
    """Refuse a --truth file written for another query (its `query_id`), before anything is
    released."""
    written_for = _read_json(path, "--truth").get("query_id")
    if written_for is not None and written_for != query_id:
        raise ParameterError(
            "--truth",
            str(path),
            f"the `fleet run --json` output of query {query_id!r}",
            f"it is the truth of query {written_for!r}",
        )


def truth_by_cell(entries: list[tuple[str, int]], scheme: geo.LocationScheme) -> dict[int, int]:
    return {scheme.parse_cell(cell, "--truth location_id"): count for cell, count in entries}


def _row(scheme: geo.LocationScheme, entry: object, source: str) -> CellRow:
    if not isinstance(entry, Mapping) or "location_id" not in entry:
        raise ParameterError(source, entry, "estimates with a location_id each")
    return CellRow(
        cell=scheme.parse_cell(str(entry["location_id"]), f"{source} location_id"),
        estimate=_number(entry.get("estimate"), source, "estimate"),
        std_error=_number(entry.get("std_error"), source, "std_error"),
        ci_low=_number(entry.get("ci_low"), source, "ci_low"),
        ci_high=_number(entry.get("ci_high"), source, "ci_high"),
        participants=int(_number(entry.get("participants", 0), source, "participants")),
    )


def _number(value: object, source: str, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParameterError(f"{source} {name}", value, "a number")
    return float(value)


def _read_json(path: Path, option: str) -> Mapping[str, object]:
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ParameterError(option, str(path), "a readable JSON file", str(exc)) from None
    except ValueError as exc:
        raise ParameterError(option, str(path), "a JSON file", str(exc)) from None
    if not isinstance(data, dict):
        raise ParameterError(option, str(path), "a JSON object")
    return data


def _mechanism_words(data: Mapping[str, object]) -> str:
    name = str(data.get("mechanism", "?"))
    params = data.get("params")
    words = name.upper()
    if isinstance(params, Mapping) and params:
        words += " " + ", ".join(f"{k}={v}" for k, v in params.items())
    sigma = data.get("noise_sigma")
    if sigma:
        words += f", noise sigma {sigma}"
    return words


def _privacy_words(claims: object) -> str:
    """The release's headline figure in one line (`ldpcollect.privacy_headline`): the public's
    tightest epsilon at the ledger's delta, rounded up, or words when there is none."""
    if not isinstance(claims, list):
        return "privacy cost not recorded"
    found = [c for c in claims if isinstance(c, Mapping)]
    if not any(c.get("view") == "public" for c in found):
        return "privacy cost not recorded"
    return f"public: {release_headline(found).short()}"


def _rmse(diffs: Sequence[float]) -> float:
    return math.sqrt(sum(d * d for d in diffs) / len(diffs)) if diffs else 0.0
