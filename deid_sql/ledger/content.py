"""An entry's content hash computed from the persons being appended, without asking the database to sort them.

An entry's hash covers the text of its persons and tuples (``database._TEXT``): one line per (person,
tuple), ``pseudonym groups`` with the groups joined by commas, in the pseudonyms' byte order (then the
tuple's label), joined by newlines; SHA-256 of its UTF-8 bytes as lowercase hex.  The database computes
it when ``ledger --verify`` checks an entry.  At append, sorting a million pseudonyms' text there (and
aggregating 70 MB of it) took about a second, half the append; the same text is made here by sorting
integers: a pseudonym of 64 lowercase hex digits sorts as its number, and its first 15 digits (the
ledger's integer key, ``combine.person_keys``) order the persons unless two share them.  Anything else
(the integer form, other text, two pseudonyms sharing a key) returns None and the database computes it;
both are tested equal.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..contract.pseudonym import INTEGER_DIGITS
from .combine import HEX_WIDTH, person_keys


def content_sha256(pseudonyms: pa.Array | pa.ChunkedArray, label: np.ndarray, tuples: np.ndarray) -> str | None:
    """The content hash of an entry holding ``pseudonyms`` (one per (person, tuple), distinct pairs) under
    tuple ``label`` (row ``label`` of ``tuples``: the group ids per QI), or None where only the
    database's sort gives it."""
    array = pseudonyms.combine_chunks() if isinstance(pseudonyms, pa.ChunkedArray) else pseudonyms
    if not len(array):
        return hashlib.sha256(b"").hexdigest()
    if array.type != pa.string() or array.null_count:
        return None
    n = len(array)
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)[array.offset:array.offset + n + 1]
    if not (np.diff(offsets) == HEX_WIDTH).all():
        return None
    digits = np.frombuffer(array.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]].reshape(n, HEX_WIDTH)
    lead = np.ascontiguousarray(digits[:, :INTEGER_DIGITS])  # what the key is read from
    if not (((lead - np.uint8(48)) < 10) | ((lead - np.uint8(97)) < 6)).all():
        return None  # not lower-case hex digits (upper case sorts apart from lower): the database's order only
    keys = person_keys(array)
    label = np.asarray(label, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    tie = np.flatnonzero(keys[order[1:]] == keys[order[:-1]])
    if tie.size:
        if (digits[order[tie]] != digits[order[tie + 1]]).any():
            return None  # two persons share a key: their order needs every digit
        order = np.lexsort((label, keys))  # a person on several tuples: by label
    texts = pa.array([" " + ",".join(str(int(g)) for g in row) + "\n" for row in np.asarray(tuples).reshape(
        len(tuples), -1)], pa.string())
    lines = pc.binary_join_element_wise(array.take(pa.array(order)), texts.take(pa.array(label[order])), "")
    out = np.frombuffer(lines.buffers()[1], dtype=np.int32)[lines.offset:lines.offset + n + 1]
    text = memoryview(lines.buffers()[2])[int(out[0]):int(out[-1]) - 1]  # the last line has no newline
    return hashlib.sha256(text).hexdigest()
