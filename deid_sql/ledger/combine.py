"""Dense keys of label tuples and one label per person: the arithmetic of combining releases.

A recipient's knowledge of a person is the tuple of their labels in every release; grouping persons
by such tuples is a dense renumbering of integer rows.  Hash-based (Arrow's dictionary encoding)
where rows pack into one int64, so a million persons are grouped without sorting rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_LIMIT = 2.0 ** 62


def dense(values: np.ndarray) -> np.ndarray:
    """0..G−1 numbering of int64 values (equal values, equal numbers), by hashing."""
    if not values.size:
        return np.zeros(0, dtype=np.int64)
    encoded = pc.dictionary_encode(pa.array(np.ascontiguousarray(values, dtype=np.int64)))
    return np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)


def dense_keys(rows: np.ndarray) -> np.ndarray:
    """A dense key per row of an int matrix (values >= −1): equal rows, equal keys, numbered 0..G−1.

    Columns are packed by mixed radix into one int64 while the radices allow, renumbered, and packed
    on with the next columns."""
    rows = np.asarray(rows, dtype=np.int64)
    n, width = rows.shape
    if width == 0 or n == 0:
        return np.zeros(n, dtype=np.int64)
    key = np.zeros(n, dtype=np.int64)
    span = 1.0
    for j in range(width):
        radix = int(rows[:, j].max()) + 2
        if span * radix >= _LIMIT:
            key = dense(key)
            span = float(key.max()) + 1
        key = key * radix + (rows[:, j] + 1)
        span *= radix
    return dense(key)


def first_of(key: np.ndarray, n: int) -> np.ndarray:
    """The first position of each key 0..n−1 in ``key`` (−1 for a key that does not occur): the row that
    stands for its group."""
    out = np.full(n, -1, dtype=np.int64)
    if key.size:
        out[key[::-1]] = np.arange(key.size - 1, -1, -1)
    return out


def persons_of(pseudonyms: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The distinct pseudonyms, and each row's index among them."""
    if not len(pseudonyms):
        return pseudonyms, np.zeros(0, dtype=np.int64)
    encoded = pc.dictionary_encode(pseudonyms)
    return encoded.dictionary, np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)


def per_person(person: np.ndarray, key: np.ndarray, n: int, absent: int = -1,
               first_set: int | None = None) -> tuple[np.ndarray, np.ndarray, list[tuple[int, ...]]]:
    """One key per person from (person, key) pairs: the key itself when the person has one; for a
    person with several, the key of their set (``first_set`` + the set's index, beyond every single
    key); ``absent`` for persons with none.  Returns the keys, whether each person had several, and
    the sets in index order."""
    out = np.full(n, absent, dtype=np.int64)
    many = np.zeros(n, dtype=bool)
    sets: dict[tuple[int, ...], int] = {}
    if not len(person):
        return out, many, []
    counts = np.bincount(person, minlength=n)
    single = counts[person] == 1
    out[person[single]] = key[single]
    several = np.flatnonzero(counts > 1)
    if several.size:
        top = int(key.max()) + 1 if first_set is None else first_set
        order = np.argsort(person, kind="stable")
        sorted_keys = key[order]
        starts = np.searchsorted(person[order], several)
        for p, start in zip(several, starts):
            members = tuple(sorted(set(sorted_keys[start:start + counts[p]].tolist())))
            if len(members) == 1:
                out[p] = members[0]
                continue
            out[p] = sets.setdefault(members, top + len(sets))
            many[p] = True
    return out, many, list(sets)
