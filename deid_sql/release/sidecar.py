"""The record written beside every release: what left, from what, under which policy, judged how.

A reviewer signs a release, not a command line: the sidecar holds the hashes that tie the
release to its spec, policy, source and population; every column with its role; the figures
measured on the released rows; the gate's criteria and verdict (with any ``--accept-risk``
reason); the software version, the UTC time, and the command or API call that reproduces it.
Files get ``<release file>.release.json``; a table or view inside a database gets a table
``<name>__release`` with the same JSON, created in the same transaction.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..domains.recoding import Recoding
from ..invocation import INVOCATION as INVOCATION  # re-exported: releases read it from here
from ..invocation import set_invocation as set_invocation

if TYPE_CHECKING:
    from ..spec.file import Spec

FORMAT = "deid-sql release"
VERSION = 1
SUFFIX = ".release.json"
TABLE_SUFFIX = "__release"

def sidecar_path(release: Path) -> Path:
    """``release.parquet`` → ``release.parquet.release.json`` (one sidecar per release file)."""
    return release.with_name(release.name + SUFFIX)


def sidecar_table(name: str) -> str:
    return name + TABLE_SUFFIX


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def recoding_sha256(recoding: Recoding, names: Sequence[str]) -> str:
    """SHA-256 of what a recoding does: per QI, each domain position's group and the labels."""
    payload = [{"qi": name, "group_of": [int(v) for v in q.group_of], "labels": list(q.labels)}
               for name, q in zip(names, recoding.qis)]
    return text_sha256(json.dumps(payload, separators=(",", ":"), ensure_ascii=False))


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def json_safe(value: Any, nan: bool = True) -> Any:
    """``value`` with every infinite float as None (JSON has no infinity: a criterion judged on no group,
    ``min_l`` with every value ignored, is vacuous, and its figure is written null); NaN as None too
    unless ``nan=False`` keeps it (for a writer that refuses it)."""
    if isinstance(value, float) and not math.isfinite(value) and (nan or not math.isnan(value)):
        return None
    if isinstance(value, Mapping):
        return {k: json_safe(v, nan) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v, nan) for v in value]
    return value


def to_json(record: Mapping[str, Any]) -> str:
    """The record as strict JSON (no Infinity or NaN: ``json_safe``)."""
    return json.dumps(json_safe(record), indent=2, ensure_ascii=False, default=str, allow_nan=False) + "\n"


def as_table(record: Mapping[str, Any]) -> pa.Table:
    """The sidecar as a one-row table (written beside a release inside a database)."""
    return pa.table({"release": [str(record.get("release", {}).get("name", ""))],
                     "created_at": [str(record.get("created_at", ""))],
                     "verdict": [str(record.get("gate", {}).get("verdict", ""))],
                     "sidecar": [to_json(record)]})


def read_sidecar(path: Path) -> dict[str, Any]:
    """A sidecar file's JSON (for the report and for tests)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path} is not a deid-sql release sidecar")
    return data


def population_kind(spec: Spec) -> str:
    """Where the figures' population comes from, as the sidecar's ``risk_model`` records it: ``table``
    (a census), ``size`` (``population = { size | region }``), ``weights`` (``[weights]``) or ``sample``
    (the sample is its own population)."""
    if spec.population is not None:
        return "table"
    if spec.weights is not None:
        return "weights"
    return "size" if spec.population_size is not None else "sample"


def population_without_census(spec: Spec) -> dict[str, Any] | str:
    """The sidecar's ``population`` without a census table: ``"sample"`` only when the sample is its
    own population; a given size (``{"size": N, "region": …}``) or a weight column (``{"weights": …}``)
    otherwise, so the record says the population the figures used."""
    if spec.weights is not None:
        return {"weights": spec.weights}
    if spec.population_size is not None:
        return {"size": int(spec.population_size), "region": spec.population_region}
    return "sample"
