"""How the ledger tells persons apart: a pseudonym's integer key, looked up without a string join (issue 41).

A recipient links releases by the pseudonym, so the ledger keys every person by the integer
pseudonym form (the first 15 hex digits of the HMAC): the hex and the integer pseudonym of one
person are one person, and a million persons are looked up in a recipient's state as integers.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from deid_sql.contract.pseudonym import pseudonym
from deid_sql.domains.domain import IntegerDomain
from deid_sql.domains.recoding import QIRecoding, Recoding
from deid_sql.ledger.combine import person_keys, sorted_lookup
from deid_sql.ledger.store import Entry, Ledger, Released
from deid_sql.release.figures import FLAG, Census, count_groups
from deid_sql.release.union import ledger_qis, persons_and_groups, released_persons
from deid_sql.sqltext import to_sql

KEY = b"ledger keys: a test key of 32 bytes"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=6), min_size=1, max_size=40), st.integers(0, 5), st.booleans())
def test_a_hex_pseudonym_keys_as_its_integer_form(values: list[str], start: int, upper: bool) -> None:
    hexes = [str(pseudonym(KEY, v)) for v in values]
    expected = [int(pseudonym(KEY, v, "integer")) for v in values]  # type: ignore[arg-type]
    array = pa.array(["x" * 7] + [h.upper() if upper else h for h in hexes]).slice(1)  # an odd buffer offset
    start = min(start, len(values) - 1)
    assert person_keys(array.slice(start)).tolist() == expected[start:]
    assert person_keys(pa.chunked_array([array[:1], array[1:]])).tolist() == expected
    assert person_keys(pa.array(expected, pa.int64())).tolist() == expected
    assert person_keys(pa.array([str(e) for e in expected])).tolist() == expected


def test_text_that_is_no_pseudonym_is_refused() -> None:
    with pytest.raises(ValueError, match="not pseudonyms"):
        person_keys(pa.array(["P001", "P002"]))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-(2 ** 62), 2 ** 62), max_size=60, unique=True),
       st.lists(st.integers(-(2 ** 62), 2 ** 62), max_size=60), st.booleans())
def test_sorted_lookup_finds_each_key_or_none(keys: list[int], others: list[int], dense: bool) -> None:
    if dense:  # keys packed close together: many share a bucket
        keys = sorted({k % 97 for k in keys})
        others = [o % 131 for o in others]
    stored = np.array(sorted(keys), dtype=np.int64)
    wanted = np.array(others + keys[::2], dtype=np.int64)
    where = {k: i for i, k in enumerate(stored.tolist())}
    assert sorted_lookup(stored, wanted).tolist() == [where.get(w, -1) for w in wanted.tolist()]


def _entry(name: str, recoding: Recoding) -> Entry:
    return Entry(seq=0, recipient="r", release=name, created_at="t", key_fingerprint="f", spec="s",
                 spec_sha256=None, policy="p", record_sha256="h", target="t", persons=0, rows=0, held=0,
                 qis=ledger_qis(recoding, ["age"]), content_sha256="", previous="", hash="")


def test_a_ledger_of_the_first_layout_is_replayed_then_rebuilt(tmp_path: Path) -> None:
    """The first ledgers kept the recipients' state by pseudonym text: derived data, so a reader replays
    the entries and the next append rebuilds it; the chain is untouched."""
    domain = IntegerDomain(0, 9)
    bands = Recoding((QIRecoding.from_groups(domain, np.arange(10) // 5),))
    exact = Recoding((QIRecoding.from_groups(domain, np.arange(10)),))
    hexes = [str(pseudonym(KEY, f"P{i}")) for i in range(10)]
    path = tmp_path / "ledger.duckdb"
    with Ledger(path) as ledger:
        ledger.append(_entry("one", bands), Released(pa.array(hexes), (np.arange(10) // 5).reshape(-1, 1)))
        keys = person_keys(pa.array(hexes))
        held_now, matrix_now = ledger.held("r", keys, 1)
    con = duckdb.connect(str(path))  # the first layout's state table, as such a ledger holds it
    con.execute("DROP TABLE ledger_state")
    con.execute("CREATE TABLE ledger_state (recipient VARCHAR NOT NULL, pseudonym VARCHAR NOT NULL, "
                "combined BIGINT NOT NULL)")
    con.executemany("INSERT INTO ledger_state VALUES ('r', ?, ?)", [[h, int(c)] for h, c in zip(hexes, held_now)])
    con.close()
    with Ledger(path, create=False) as ledger:
        held, matrix = ledger.held("r", keys, 1)
        assert held.tolist() == held_now.tolist() and matrix.tolist() == matrix_now.tolist()
        assert not ledger.verify()
    with Ledger(path) as ledger:  # opened to append: rebuilt in the integer layout
        ledger.append(_entry("two", exact), Released(pa.array(hexes[:4]), np.arange(4).reshape(-1, 1)))
        assert not ledger.verify()
        held, matrix = ledger.held("r", keys, 2)
        assert len(set(held[:4].tolist())) == 4 and len(set(held[5:].tolist())) == 1
    con = duckdb.connect(str(path), read_only=True)
    columns = [r[0] for r in con.execute("SELECT column_name FROM duckdb_columns() "
                                         "WHERE table_name = 'ledger_state'").fetchall()]
    con.close()
    assert "person" in columns and "pseudonym" not in columns


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.sampled_from(["a", "b", "c", "zz"]), st.sampled_from(["x", "y"]),
                          st.booleans(), st.booleans()), min_size=0, max_size=30), st.booleans())
def test_one_query_gives_the_gates_counts_and_the_ledgers_tuples(
        rows: list[tuple[int, str, str, bool, bool]], flagged: bool) -> None:
    """``persons_and_groups`` equals ``count_groups`` (persons) and ``released_persons`` run apart: persons
    on several rows and tuples, suppressed rows with or without their pseudonym, labels outside the
    policy ("zz")."""
    table = pa.table({
        "pid": pa.array([None if hide and flag else str(pseudonym(KEY, f"P{p}")) for p, _, _, flag, hide in rows],
                        pa.string()),
        "q0": pa.array([a for _, a, _, _, _ in rows], pa.string()),
        "q1": pa.array([b for _, _, b, _, _ in rows], pa.string()),
        FLAG: pa.array([flag and flagged for _, _, _, flag, _ in rows], pa.bool_())})
    census = Census([["a", "b", "c"], ["x", "y"]], None, len(rows))
    con = duckdb.connect()
    con.register("released_rows", table)

    def run(query: exp.Expression) -> pa.Table:
        return con.sql(to_sql(query, "duckdb")).to_arrow_table()

    try:
        relation = exp.to_table("released_rows")
        flag = FLAG if flagged else None
        counted, released = persons_and_groups(run, relation, "pid", ["q0", "q1"], flag, census)
        expected = count_groups(run, relation, ["q0", "q1"], flagged, "pid")
        apart = released_persons(run, relation, "pid", ["q0", "q1"], flag, census)
    finally:
        con.close()
    assert counted.to_pylist() == expected.cast(counted.schema).to_pylist()

    def tuples(r: Released) -> set[tuple[str, tuple[int, ...]]]:
        return {(str(p), tuple(g)) for p, g in zip(r.pseudonyms.to_pylist(), r.groups.tolist())}

    assert tuples(released) == tuples(apart) and released.persons == apart.persons


def test_a_repeated_row_is_recorded_once(tmp_path: Path) -> None:
    """A release read without DISTINCT (no [person]) may show a person's tuple twice: the entry holds it once,
    and a person on two tuples keeps both."""
    domain = IntegerDomain(0, 9)
    exact = Recoding((QIRecoding.from_groups(domain, np.arange(10)),))
    hexes = [str(pseudonym(KEY, f"P{i}")) for i in range(3)]
    shown = Released(pa.array([hexes[0], hexes[1], hexes[0], hexes[2], hexes[2]]),
                     np.array([[1], [2], [1], [3], [4]]))
    assert shown.persons == 3
    with Ledger(tmp_path / "ledger.duckdb") as ledger:
        stored = ledger.append(_entry("one", exact), shown)
        rows = ledger.db.rows("SELECT pseudonym, label FROM {persons} ORDER BY pseudonym, label")
        assert not ledger.verify()
    assert stored.rows == 4 and len(rows) == 4 and stored.persons == 0  # persons: the caller's figure
    assert sorted(r[0] for r in rows) == sorted([hexes[0], hexes[1], hexes[2], hexes[2]])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2 ** 256 - 1), min_size=0, max_size=30, unique=True), st.data())
def test_the_content_hash_made_at_append_is_the_databases(tmp_path_factory: pytest.TempPathFactory,
                                                          numbers: list[int], data: st.DataObject) -> None:
    """The entry's content hash computed from the persons appended (sorted as integers) equals the hash
    ``ledger --verify`` computes in the database (sorted as text), persons on several tuples, tuples with
    labels outside the policy (-1), two persons sharing a key and upper-case hex (both: the database's)."""
    from deid_sql.ledger.content import content_sha256

    hexes = [f"{x:064x}" for x in numbers]
    shared = data.draw(st.booleans()) and len(hexes) > 1  # two pseudonyms with the same first 15 digits
    if shared:
        hexes[1] = hexes[0][:15] + hexes[1][15:]
    upper = data.draw(st.booleans()) and bool(hexes)
    if upper:
        hexes[0] = hexes[0].upper()
        upper = hexes[0][:15] != hexes[0][:15].lower()  # (digits there: the same order)
    rows = [(h, data.draw(st.integers(0, 3))) for h in hexes for _ in range(data.draw(st.integers(1, 2)))]
    rows = sorted(set(rows), key=lambda r: data.draw(st.integers(0, 100)))  # distinct pairs, any order
    groups = np.array([[data.draw(st.integers(-1, 12)), t] for _, t in rows], dtype=np.int64).reshape(len(rows), 2)
    for i, (_, t) in enumerate(rows):  # one tuple per label
        groups[i] = [t * 3 - 1, t]
    domain = IntegerDomain(0, 9)
    exact = Recoding((QIRecoding.from_groups(domain, np.arange(10)), QIRecoding.from_groups(domain, np.arange(10))))
    released = Released(pa.array([h for h, _ in rows], pa.string()), groups)
    folder = tmp_path_factory.mktemp("content")
    with Ledger(folder / "ledger.duckdb") as ledger:
        entry = _entry("one", exact)
        stored = ledger.append(Entry(**{**entry.__dict__, "qis": ledger_qis(exact, ["age", "visits"])}), released)
        assert stored.content_sha256 == ledger.db.content_hash(stored.seq)
        assert not ledger.verify()
    label_of = {t: i for i, t in enumerate(sorted({t for _, t in rows}))}
    fast = content_sha256(pa.array([h for h, _ in rows], pa.string()), np.array([label_of[t] for _, t in rows]),
                          np.array([[t * 3 - 1, t] for t in sorted(label_of)], dtype=np.int64).reshape(-1, 2))
    shown = {h for h, _ in rows}
    tie = len({h[:15] for h in shown}) < len(shown)  # (small numbers share their leading zeros)
    assert (fast is None) == (bool(rows) and (upper and hexes[0] in shown or tie))


def test_a_persons_tuples_are_hashed_in_label_order(tmp_path: Path) -> None:
    """A person on two tuples shown in the other order than their labels': the hash orders them by label."""
    hexes = sorted(str(pseudonym(KEY, f"P{i}")) for i in range(2))
    exact = Recoding((QIRecoding.from_groups(IntegerDomain(0, 9), np.arange(10)),))
    shown = Released(pa.array([hexes[0], hexes[1], hexes[1]]), np.array([[1], [2], [1]]))  # P1: labels 1, then 0
    with Ledger(tmp_path / "ledger.duckdb") as ledger:
        stored = ledger.append(_entry("one", exact), shown)
        assert stored.content_sha256 == ledger.db.content_hash(stored.seq)
