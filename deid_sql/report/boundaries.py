"""Boundary-policy results as rows, written to CSV or JSON atomically."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from ..errors import OutputError
from ..search.boundary import BoundarySearch
from ..storage.atomic import write_text

COLUMNS = ("rank", "found_at", "policy", "readable", "risk", "loss", "dominated", "k", "expected_reidentifications",
           "kl", "iyengar_loss")


def boundary_rows(result: BoundarySearch, bits: bool = False) -> list[dict[str, Any]]:
    """One row per boundary policy, in discovery order; ``dominated`` per seed 001 Def. 2.1.  With
    ``bits`` each row also gives the policy's bit string (a last column): the exact lattice node for
    tools that want it, never by default because it runs to hundreds of characters."""
    rows = []
    for rank, (b, dominated) in enumerate(zip(result.found, result.dominated()), 1):
        m = b.metrics
        rows.append({"rank": rank, "found_at": b.found_at, "policy": b.policy.text(),
                     "readable": b.policy.readable(), "risk": m.risk, "loss": m.loss, "dominated": dominated,
                     "k": m.k, "expected_reidentifications": m.expected_reidentifications, "kl": m.kl,
                     "iyengar_loss": m.iyengar_loss})
        if bits:
            rows[-1]["bits"] = b.policy.bit_text()
    return rows


def write_boundaries(result: BoundarySearch, path: Path, overwrite: bool = False, bits: bool = False) -> None:
    """``.csv`` (one row per policy) or ``.json`` (the search's settings and figures too)."""
    rows = boundary_rows(result, bits)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=COLUMNS + (("bits",) if bits else ()), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        text = buf.getvalue()
    elif suffix == ".json":
        text = json.dumps({
            "method": result.method, "threshold": result.threshold, "seed": result.seed,
            "iterations": result.iterations, "evaluations": result.evaluations, "seconds": result.seconds,
            "interrupted": result.interrupted, "non_dominated": result.non_dominated,
            "attribute_criteria": result.constraint, "policies": rows,
        }, indent=2, ensure_ascii=False) + "\n"
    else:
        raise OutputError(f"cannot tell the format of {path}; use .csv or .json")
    write_text(path, text, overwrite)
