"""The release ledger kept as tables on PostgreSQL (``[release] ledger_table``, issue 41).

The same ledger as the file: the issue's two releases (B refused to the recipient holding A), the
listing and its chain, an edited person found; its tables readable by their owner only, like a
set view's key tables; and an entry's persons hashed to the same text on both stores, so a chain
verifies the same wherever it is kept.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow.csv as pacsv
import pytest
from click.testing import Result

from deid_sql.ledger.database import LedgerTables
from deid_sql.ledger.store import Entry, Ledger, Released
from tests.engines import Engine, opened
from tests.test_ledger import KEY, A, B
from tests.test_ledger import write as write_file_spec

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from opened("postgres", tmp_path_factory)


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEID_LEDGER_KEY", KEY)


def write(folder: Path, engine: Engine, name: str) -> Path:
    """tests/test_ledger.py's persons and spec (person p: age 10·(p // 10) + 3, ZIP p % 10), the source a
    PostgreSQL table and the ledger tables in its schema."""
    spec = write_file_spec(folder, f'ledger_table = "{engine.schema}.deid_ledger"')  # type: ignore[attr-defined]
    source = engine.load(name, pacsv.read_csv(folder / "src.csv"))
    text = spec.read_text(encoding="utf-8")
    assert text.count('[source]\npath = "src.csv"') == 1
    spec.write_text(text.replace('[source]\npath = "src.csv"', f"{engine.header()}\n[source]\n{source}"),
                    encoding="utf-8")
    return spec


def test_the_ledger_on_postgres_judges_and_records_like_the_file(
        tmp_path: Path, run: Callable[..., Result], postgres: Engine) -> None:
    spec = write(tmp_path, postgres, "ledger_src")
    run("materialize", spec, "--policy", A, "--out", "a.parquet")
    record = json.loads((tmp_path / "a.parquet.release.json").read_text(encoding="utf-8"))
    where = f"postgres:{postgres.schema}.deid_ledger"  # type: ignore[attr-defined]
    assert record["ledger"]["path"] == where and record["ledger"]["entry"] == 1
    assert not (tmp_path / "deid-sql-ledger.duckdb").exists()  # nothing beside the spec
    refused = run("materialize", spec, "--policy", B, "--out", "b.parquet", expect=2)
    assert "with the 1 earlier release to default" in refused.stderr and "k 1" in refused.stderr
    assert not (tmp_path / "b.parquet").exists()
    listed = json.loads(run("ledger", spec, "--verify", "--json", "--release", "a.parquet.release.json").stdout)
    assert listed["ledger"] == where and listed["verified"] is True and listed["problems"] == []
    assert [r["recipient"] for r in listed["recipients"]] == ["default"]
    assert listed["recipients"][0]["union_k"] == 10 and listed["recipients"][0]["persons"] == 100

    location = LedgerTables(os.environ["DEID_TEST_POSTGRES_DSN"], f"{postgres.schema}.deid_ledger")  # type: ignore[attr-defined]
    with Ledger(location, create=False) as ledger:
        entry = ledger.entries()[0]
        persons = ledger.db.arrow("SELECT pseudonym, label FROM {persons} ORDER BY pseudonym")
        tuples = ledger.tuples(entry.seq)
    # the same persons appended to a file ledger hash to the same content
    groups = np.stack([tuples[int(label)] for label in persons.column("label").to_pylist()])
    with Ledger(tmp_path / "file.duckdb") as file_ledger:
        again = file_ledger.append(Entry(**{**entry.__dict__, "seq": 0, "hash": "", "previous": "",
                                            "content_sha256": ""}),
                                   Released(persons.column("pseudonym"), groups))
    assert again.content_sha256 == entry.content_sha256

    # owner-only: no grant to PUBLIC or anyone else on any of the five tables
    con = postgres.backend.con  # type: ignore[attr-defined]
    for table in ("entries", "tuples", "persons", "state", "combined"):
        acl = con.execute("SELECT relacl::text[], pg_get_userbyid(relowner) FROM pg_class WHERE oid = to_regclass(%s)",
                          [f'"{postgres.schema}"."deid_ledger_{table}"']).fetchall()  # type: ignore[attr-defined]
        entries, owner = acl[0]
        assert entries and all(e.startswith(f"{owner}=") for e in entries), (table, entries)

    # an edited person breaks the chain
    con.execute(f'UPDATE "{postgres.schema}"."deid_ledger_persons" SET label = 1 - label '  # type: ignore[attr-defined]
                f"WHERE pseudonym = (SELECT min(pseudonym) FROM \"{postgres.schema}\".\"deid_ledger_persons\")")  # type: ignore[attr-defined]
    broken = run("ledger", spec, "--verify", expect=1)
    assert "BROKEN" in broken.stdout and "persons or labels were edited" in broken.stdout


def test_a_table_of_the_users_under_a_ledger_name_is_left_alone(
        tmp_path: Path, run: Callable[..., Result], postgres: Engine) -> None:
    """ledger_table names five tables; one that already exists with other columns is the user's: the
    release is refused in one line before anything is created or any grant revoked."""
    schema = postgres.schema  # type: ignore[attr-defined]
    spec = write(tmp_path, postgres, "ledger_src_foreign")
    spec.write_text(spec.read_text(encoding="utf-8").replace(f'"{schema}.deid_ledger"', f'"{schema}.visits"'),
                    encoding="utf-8")
    con = postgres.backend.con  # type: ignore[attr-defined]
    con.execute(f'CREATE TABLE "{schema}"."visits_entries" (visit_id INTEGER, note TEXT)')
    con.execute(f'GRANT SELECT ON "{schema}"."visits_entries" TO PUBLIC')
    refused = run("materialize", spec, "--policy", A, "--out", "a.parquet", expect=2)
    assert "already holds other columns (visit_id, note)" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "a.parquet").exists()
    acl = con.execute("SELECT relacl::text[] FROM pg_class WHERE oid = to_regclass(%s)",
                      [f'"{schema}"."visits_entries"']).fetchall()[0][0]
    assert any(e.startswith("=r/") for e in acl), acl  # PUBLIC's grant kept
    made = con.execute("SELECT count(*) FROM pg_class WHERE relnamespace = to_regnamespace(%s) AND relname IN "
                       "('visits_tuples', 'visits_persons', 'visits_state', 'visits_combined')", [schema]).fetchall()
    assert made[0][0] == 0
