"""The cells cache: a second command on the same data skips the engine's ``GROUP BY``.

Loading a problem reads the data twice over (the domain checks, then one ``GROUP BY`` per table);
on PostgreSQL or Spark that is seconds to a minute, the same every time a command runs on
unchanged data.  The cells (and the category values read from the data) are stored in the user's
cache folder (``userdirs.cache_dir()``) under two hashes:

- the *identity*: everything of the spec that decides the cells — the QI declarations, where the
  source and population live, the engine and its settings, the hierarchy files' contents, the
  domain size limit and this package's version and cache format;
- the *fingerprint* of the data as it is now: for files (CSV, Parquet, a DuckDB file and its WAL,
  every file a glob matched) their size, modification time and inode; for an engine's own tables
  their row count and the sum of a 64-bit hash of every row's QI values (``Backend.checksum``,
  one scan without grouping).

Beside the cells an entry keeps *extras*: counts a command derives from the same data on demand,
each under its own name (``loading.sensitive``'s cells of a sensitive column: ``extra``/``put_extra``),
in the entry's folder, so a changed source, spec or data drops them with the cells.

A lookup uses an entry only when both match, and the entry's arrays match the checksum it was
written with; a stale entry (same identity, other fingerprint) is never used, and is deleted
when the fresh one is stored.  Only loads without a data problem are stored, so a hit stands
for data that passed every check.  Entries are written to a temporary folder and renamed, so a
reader never sees half of one.  The folder is the owner's alone: cells are counts of
quasi-identifier combinations, derived from the data.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..backends.base import Backend
from ..contract.shift import shift_key
from ..domains.domain import CategoryDomain, Domain
from ..domains.limits import value_cap
from ..errors import BackendError
from ..spec.file import Spec, TableRef
from ..storage.userdirs import cache_dir, private_folder
from .cells import Cells
from .shifting import shifts_qis, source_shift

#: 2: cells of persons tell keys apart byte for byte and break first/last ties in the domain's order
FORMAT = 2
ARRAYS = "cells.npz"
META = "meta.json"
EXTRAS = "extras"


@dataclass(frozen=True)
class CacheKey:
    """Where a load's entry lives: ``identity`` (the spec's part) and ``digest`` (with the data's
    fingerprint); ``fingerprint`` is kept in the entry to say what it was computed from."""

    identity: str
    digest: str
    fingerprint: dict[str, Any]


@dataclass(frozen=True)
class CachedLoad:
    """What a load read from the data: each category QI's values, and the cells."""

    values: dict[str, tuple[str, ...]]
    sample: Cells
    population: Cells | None
    #: the tables' columns (name -> type) when the load read them: with them a load of files
    #: needs no engine until a query runs (``backends.lazy``)
    columns: dict[str, dict[str, str]] | None = None


class CellsCache:
    """The cells of earlier loads, under ``top`` (default: the user's cache folder), in
    ``cells/v<format>``; every folder from ``top`` down is its owner's alone."""

    def __init__(self, top: Path | None = None) -> None:
        self.top = top if top is not None else cache_dir()
        self.folder = self.top / "cells" / f"v{FORMAT}"

    # -- keys ---------------------------------------------------------------------------------
    def key(self, spec: Spec, backend: Backend | None, source_view: str, population_view: str | None,
            ) -> CacheKey | None:
        """The key of ``spec``'s load on the data as it is now, or None when the data cannot be
        fingerprinted (then nothing is cached: never a guess).  Files need no ``backend``; an
        engine's table is fingerprinted by a query on its session view."""
        identity = _digest(_identity(spec))
        try:
            fingerprint = {"source": _fingerprint(backend, spec.source, source_view, _source_columns(spec))}
            if spec.population is not None and population_view is not None:
                fingerprint["population"] = _fingerprint(backend, spec.population, population_view,
                                                         _population_columns(spec))
        except (OSError, BackendError):
            return None
        return CacheKey(identity, _digest({"identity": identity, "data": fingerprint}), fingerprint)

    def _entry(self, key: CacheKey) -> Path:
        return self.folder / key.identity[:32] / key.digest[:32]

    # -- lookup ---------------------------------------------------------------------------------
    def get(self, key: CacheKey) -> CachedLoad | None:
        """The entry of ``key``, or None (missing, of another format, or damaged: then removed)."""
        entry = self._entry(key)
        if not (entry / META).is_file():
            return None
        try:
            meta = json.loads((entry / META).read_text(encoding="utf-8"))
            arrays_path = entry / ARRAYS
            if meta.get("format") != FORMAT or meta.get("digest") != key.digest:
                raise ValueError("another format or key")
            if _file_sha256(arrays_path) != meta["arrays_sha256"]:
                raise ValueError("arrays changed after they were written")
            with np.load(arrays_path, allow_pickle=False) as arrays:
                sample = Cells(np.ascontiguousarray(arrays["sample_positions"], dtype=np.int32),
                               np.asarray(arrays["sample_counts"], dtype=np.int64))
                population = (Cells(np.ascontiguousarray(arrays["population_positions"], dtype=np.int32),
                                    np.asarray(arrays["population_counts"], dtype=np.int64))
                              if "population_positions" in arrays.files else None)
            values = {name: tuple(str(v) for v in vs) for name, vs in meta["values"].items()}
            columns = ({table: {str(n): str(t) for n, t in pairs} for table, pairs in meta["columns"].items()}
                       if meta.get("columns") else None)
        except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError):
            shutil.rmtree(entry, ignore_errors=True)
            return None
        return CachedLoad(values, sample, population, columns)

    # -- store ----------------------------------------------------------------------------------
    def put(self, key: CacheKey, spec: Spec, domains: Sequence[Domain], sample: Cells,
            population: Cells | None, columns: Mapping[str, Mapping[str, str]] | None = None) -> Path | None:
        """Store a load (atomically) and delete the identity's stale entries; None when the cache
        folder cannot be written (a read-only home: the command goes on without it)."""
        entry = self._entry(key)
        try:
            for level in (self.top, self.top / "cells", self.folder):
                private_folder(level)
            parent = private_folder(entry.parent)
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=parent))
            arrays = {"sample_positions": sample.positions, "sample_counts": sample.counts}
            if population is not None:
                arrays |= {"population_positions": population.positions, "population_counts": population.counts}
            np.savez(tmp / ARRAYS, **arrays)  # type: ignore[arg-type]
            meta = {
                "format": FORMAT, "digest": key.digest, "identity": key.identity,
                "written": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "spec": str(spec.path), "source": spec.source.describe(),
                "population": spec.population.describe() if spec.population is not None else None,
                "fingerprint": key.fingerprint, "arrays_sha256": _file_sha256(tmp / ARRAYS),
                "values": {q.name: list(d.values) for q, d in zip(spec.qis, domains) if isinstance(d, CategoryDomain)},
                "columns": ({table: list(cols.items()) for table, cols in columns.items()} if columns else None),
            }
            (tmp / META).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
            for written in (tmp / ARRAYS, tmp / META):
                written.chmod(0o600)
            try:
                os.replace(tmp, entry)
            except OSError:  # another run stored the same entry first
                shutil.rmtree(tmp, ignore_errors=True)
            for other in parent.iterdir():
                if other.name != entry.name and not other.name.startswith(".tmp-"):
                    shutil.rmtree(other, ignore_errors=True)  # stale: the same spec on other data
        except OSError:
            return None
        return entry


    # -- extras: derived counts kept beside the cells ----------------------------------------------
    def extra(self, key: CacheKey, name: str) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
        """The arrays and the meta stored as ``name`` (``extra_name``) in ``key``'s entry, or None
        (missing, damaged: then removed).  Only an entry whose cells are stored holds extras."""
        folder = self._entry(key) / EXTRAS
        arrays_path, meta_path = folder / f"{name}.npz", folder / f"{name}.json"
        if not meta_path.is_file():
            return None
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            if meta.get("digest") != key.digest or _file_sha256(arrays_path) != meta["arrays_sha256"]:
                raise ValueError("another entry's, or changed after it was written")
            with np.load(arrays_path, allow_pickle=False) as stored:
                arrays = {k: np.asarray(stored[k]) for k in stored.files}
        except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError):
            for path in (arrays_path, meta_path):
                path.unlink(missing_ok=True)
            return None
        return arrays, meta["meta"]

    def put_extra(self, key: CacheKey, name: str, arrays: Mapping[str, np.ndarray],
                  meta: Mapping[str, Any]) -> Path | None:
        """Store ``arrays`` and ``meta`` (JSON) as ``name`` in ``key``'s entry (atomically: the meta,
        written last, names the arrays' hash); None when the entry is not stored or the folder
        cannot be written."""
        entry = self._entry(key)
        if not (entry / META).is_file():
            return None
        try:
            folder = private_folder(entry / EXTRAS)
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder))
            np.savez(tmp / "a.npz", **arrays)  # type: ignore[arg-type]
            record = {"digest": key.digest, "arrays_sha256": _file_sha256(tmp / "a.npz"), "meta": dict(meta)}
            (tmp / "m.json").write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")
            for written in (tmp / "a.npz", tmp / "m.json"):
                written.chmod(0o600)
            os.replace(tmp / "a.npz", folder / f"{name}.npz")
            os.replace(tmp / "m.json", folder / f"{name}.json")
            shutil.rmtree(tmp, ignore_errors=True)
        except OSError:
            return None
        return folder / f"{name}.npz"


def extra_name(parts: Any) -> str:
    """A file name for an extra from what decides it (a column, linked tables' fingerprints…)."""
    return _digest(parts)[:32]


def fingerprint(backend: Backend | None, ref: TableRef, view: str, columns: Sequence[str]) -> Any:
    """The data's fingerprint of one table (files: their metadata; an engine's table: its row count
    and checksum over ``columns``, read through ``view``): what a stored extra was counted from."""
    return _fingerprint(backend, ref, view, columns)


def _identity(spec: Spec) -> dict[str, Any]:
    from .. import __version__

    hierarchies = {q.name: _file_sha256(q.hierarchy) for q in spec.qis if q.hierarchy is not None}
    out = {"format": FORMAT, "version": __version__, "qis": repr(spec.qis), "source": repr(spec.source),
           "population": repr(spec.population), "count": spec.count_column, "backend": repr(spec.backend),
           "person": repr(spec.person),
           "hierarchies": hierarchies, "value_cap": value_cap()}
    if shifts_qis(spec):  # cells of shifted dates depend on the secret: keyed on a digest of it, never the key
        out["shift"] = [list(source_shift(spec)),
                        hmac.new(shift_key(spec.columns.secret()), b"deid-sql cells cache", "sha256").hexdigest()]
    return out


def _source_columns(spec: Spec) -> list[str]:
    persons = spec.person.columns() if spec.person is not None else []
    return sorted({q.column for q in spec.qis if q.derived is None} | set(persons))


def _population_columns(spec: Spec) -> list[str]:
    return sorted({q.population_column for q in spec.qis} | {str(spec.count_column)})


def files_only(spec: Spec) -> bool:
    """Whether every table of ``spec`` is a file, so its fingerprint needs no engine."""
    return spec.source.path is not None and (spec.population is None or spec.population.path is not None)


def _fingerprint(backend: Backend | None, ref: TableRef, view: str, columns: Sequence[str]) -> Any:
    """Files by their metadata, an engine's table by its count and row-hash checksum."""
    if ref.path is None:
        if backend is None:
            raise OSError("an engine's table needs the engine to be fingerprinted")
        return {"checksum": backend.checksum(view, columns)}
    files = list(ref.matches) if ref.glob else [ref.path]
    if ref.format == "duckdb":
        wal = ref.path.with_name(ref.path.name + ".wal")
        files += [wal] if wal.exists() else []
    stats = []
    for f in files:
        st = os.stat(f)
        stats.append([str(Path(f).resolve()), st.st_size, st.st_mtime_ns, st.st_ino])
    return {"files": stats}


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
