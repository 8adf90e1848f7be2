"""The device conformance vector files (vectors/device/): one JSON file per case and
refusals.json, as `ldpcollect vectors device --out DIR` writes them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from client.device_refusals import refusal_vectors
from client.device_vector_cases import cases, make_vector


def build_vectors() -> dict[str, dict[str, Any]]:
    """Every file of vectors/device/ by name."""
    files = {f"{case.name}.json": make_vector(case) for case in cases()}
    files["refusals.json"] = refusal_vectors()
    return files


def render(data: Mapping[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"


def write_vectors(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in build_vectors().items():
        path = out / name
        path.write_text(render(data))
        written.append(path)
    return written
