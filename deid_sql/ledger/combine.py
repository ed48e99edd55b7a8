"""Dense keys of label tuples and one label per person: the arithmetic of combining releases.

A recipient's knowledge of a person is the tuple of their labels in every release; grouping persons
by such tuples is a dense renumbering of integer rows.  Hash-based (Arrow's dictionary encoding)
where rows pack into one int64, so a million persons are grouped without sorting rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..contract.pseudonym import INTEGER_DIGITS

_LIMIT = 2.0 ** 62
HEX_WIDTH = 64  # the hex pseudonym's digits


def dense(values: np.ndarray) -> np.ndarray:
    """0..G−1 numbering of int64 values (equal values, equal numbers): by rank among the values present
    when they span little more than their count (a ``bincount`` and a ``cumsum``, no hashing), else
    by hashing (numbered in order of first appearance)."""
    if not values.size:
        return np.zeros(0, dtype=np.int64)
    low, high = int(values.min()), int(values.max())
    if high - low < 4 * values.size + 1024:
        offset = values - low
        present = np.zeros(high - low + 1, dtype=np.int64)
        present[offset] = 1
        return (np.cumsum(present) - 1)[offset]
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


def person_keys(pseudonyms: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Each pseudonym as the 64-bit integer a ledger tells persons apart by: the integer pseudonym form
    (``contract.pseudonym.from_hex``: the first 15 hex digits of the HMAC), so a person's hex and integer
    pseudonyms are one person.  Hex pseudonyms (64 characters, read as hex digits unchecked: the HMAC's
    own output) are read from Arrow's buffer without a Python string each; integer ones (numbers, or
    their decimal text) are themselves.  No nulls."""
    if pa.types.is_integer(pseudonyms.type):
        return np.asarray(pseudonyms.to_numpy(zero_copy_only=False), dtype=np.int64)
    if isinstance(pseudonyms, pa.ChunkedArray):  # chunk by chunk: no copy of the text
        parts = [person_keys(chunk) for chunk in pseudonyms.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    array = pseudonyms
    if array.type != pa.string():
        array = array.cast(pa.string())
    n = len(array)
    if not n:
        return np.zeros(0, dtype=np.int64)
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)[array.offset:array.offset + n + 1]
    if not (np.diff(offsets) == HEX_WIDTH).all():
        try:  # the integer form, as text
            return np.asarray(pc.cast(array, pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)
        except pa.ArrowInvalid:
            raise ValueError("a linked column holds values that are not pseudonyms (64 hex digits, or the "
                             "integer form)") from None
    # the first 16 digits as a big-endian 64-bit number (a digit's value is its low four bits, plus 9 for
    # a letter: ASCII puts letters above 0x40); the integer form is its first 15: one digit shifted out
    digits = np.ascontiguousarray(
        np.frombuffer(array.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]].reshape(n, HEX_WIDTH)[:, :16])
    values = (digits & np.uint8(15)) + np.uint8(9) * (digits >> np.uint8(6))
    number = np.ascontiguousarray((values[:, 0::2] << np.uint8(4)) | values[:, 1::2]).view(">u8").reshape(n)
    return (number >> np.uint64(4 * (16 - INTEGER_DIGITS))).astype(np.int64)


def distinct_persons(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct integer keys (key i of the i-th person ``dense`` numbers), and each row's index among them."""
    index = dense(keys)
    return keys[first_of(index, int(index.max()) + 1 if index.size else 0)], index


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


def sorted_lookup(keys: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The position of each of ``wanted`` in ``keys`` (sorted, distinct; −1: absent).

    Pseudonyms' integer keys are uniform (an HMAC), so their top bits spread them evenly over about
    two buckets per key: a bucket's start comes from one ``bincount``, and each wanted key is
    compared with the few keys of its bucket, one vectorized gather per position in the bucket —
    a hash join's probe without building a hash table (a ``searchsorted`` of a million keys costs
    several times as much)."""
    out = np.full(wanted.size, -1, dtype=np.int64)
    if not keys.size or not wanted.size:
        return out
    low = int(min(keys[0], wanted.min()))
    span = max(int(max(keys[-1], wanted.max())) - low, 1)
    shift = np.uint64(max(span.bit_length() - max(int(keys.size).bit_length() + 1, 1), 0))

    def bucket_of(values: np.ndarray) -> np.ndarray:  # unsigned: a span of keys may pass 2**63
        return ((values.view(np.uint64) - np.uint64(low % 2 ** 64)) >> shift).astype(np.int64)

    bucket_of_key = bucket_of(np.ascontiguousarray(keys, dtype=np.int64))
    start = np.zeros(int(bucket_of_key[-1]) + 2 + 1, dtype=np.int64)
    np.cumsum(np.bincount(bucket_of_key, minlength=start.size - 1), out=start[1:])
    bucket = np.minimum(bucket_of(np.ascontiguousarray(wanted, dtype=np.int64)), start.size - 2)
    at, stop = start[bucket], start[bucket + 1]
    open_ = np.flatnonzero(at < stop)
    while open_.size:
        here = at[open_]
        hit = keys[here] == wanted[open_]
        out[open_[hit]] = here[hit]
        at[open_] += 1
        open_ = open_[~hit & (at[open_] < stop[open_])]
    return out
