"""The release ledger (issue 41, METHODS decision 16): a recipient who keeps every release links them
by the stable pseudonym, so each release to a recipient is judged on the union of what they hold.

The issue's case: 100 persons, release A (age in bands of ten, ZIP hidden, k = 10) and release B
(age hidden, ZIP kept, k = 10) both pass alone; joined on the pseudonym every person is unique.
B to the same recipient is refused naming A; B to another recipient passes; A again passes.
"""

from __future__ import annotations

import csv
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st

from deid_sql.cli import cli
from deid_sql.contract.pseudonym import pseudonym
from deid_sql.domains.domain import IntegerDomain
from deid_sql.domains.recoding import QIRecoding, Recoding
from deid_sql.evaluate.riskmodel import PopulationRisk
from deid_sql.ledger.store import Entry, Ledger, Released, key_fingerprint
from deid_sql.loading.cells import Cells
from deid_sql.release.figures import Census
from deid_sql.release.union import ledger_qis, union_figures

KEY = "5f0c1e7a9b3d46e28c71a0f4d93b6e215c8a7f30e94b1d62a7c03f58e1b9d4a6"  # a key that is a secret
ZIPS = [f"Z{i}" for i in range(10)]
A = "age:every=10|zip:top"
B = "age:top|zip:bottom"

SPEC = """population = "sample"
[source]
path = "src.csv"

[[qi]]
name = "age"
kind = "integer"
min = 0
max = 99

[[qi]]
name = "zip"
kind = "category"
values = [{zips}]

[columns]
{roles}
sensitive = ["dx"]

[release]
min_k = 10
{release}
"""


def write(folder: Path, release: str = "",
          roles: str = 'pseudonymize = ["patient_id"]\nsecret_env = "DEID_LEDGER_KEY"') -> Path:
    """Person p: age 10·(p // 10) + 3 and ZIP p % 10, so each (age band, ZIP) holds one person."""
    with (folder / "src.csv").open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["patient_id", "age", "zip", "dx"])
        for p in range(100):
            out.writerow([f"P{p:03d}", 10 * (p // 10) + 3, ZIPS[p % 10], "x"])
    spec = folder / "spec.toml"
    spec.write_text(SPEC.format(zips=", ".join(f'"{z}"' for z in ZIPS), roles=roles, release=release),
                    encoding="utf-8")
    return spec


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEID_LEDGER_KEY", KEY)


def release(run: Callable[..., Result], spec: Path, policy: str, out: str, expect: int = 0,
            *extra: str) -> Result:
    return run("materialize", spec, "--policy", policy, "--out", out, *extra, expect=expect)


def test_the_union_of_two_passing_releases_is_refused_for_the_same_recipient(
        tmp_path: Path, run: Callable[..., Result]) -> None:
    spec = write(tmp_path)
    release(run, spec, A, "a.parquet")
    record = json.loads((tmp_path / "a.parquet.release.json").read_text(encoding="utf-8"))
    assert record["ledger"]["recipient"] == "default" and record["ledger"]["entry"] == 1
    assert record["ledger"]["earlier"] == 0 and record["ledger"]["link"] == "patient_id"
    refused = release(run, spec, B, "b.parquet", 2)
    assert "with the 1 earlier release to default" in refused.stderr and "k 1" in refused.stderr
    # nothing written: the union is judged on the written temporary, which is removed with its folder
    assert not any(name.startswith(("b.parquet", ".deid-sql-tmp")) for name in os.listdir(tmp_path))
    with Ledger(tmp_path / "deid-sql-ledger.duckdb", create=False) as ledger:
        earlier = ledger.entries("default")
    assert len(earlier) == 1 and earlier[0].release in refused.stderr  # named, and not recorded
    # A again adds nothing a recipient could link: it passes, and its union figures are A's own
    again = release(run, spec, A, "a2.parquet")
    assert "union.k 10 >= 10" in again.stdout
    figures = json.loads((tmp_path / "a2.parquet.release.json").read_text(encoding="utf-8"))["figures"]
    assert figures["union"]["k"] == 10 and figures["union"]["linked_persons"] == 100


def test_the_judgment_before_the_write_is_of_the_release_alone(tmp_path: Path, run: Callable[..., Result]) -> None:
    """Before the write the query is judged alone (its pseudonyms are not computed for the union);
    the written rows are judged with the union."""
    from deid_sql import Problem
    from deid_sql.release.gate import ReleaseSource, build_gate
    from deid_sql.release.plan import plan_of

    spec = write(tmp_path)
    release(run, spec, A, "a.parquet")
    with Problem.from_spec(spec, cache=False) as problem:
        plan = plan_of(problem, B)
        gate = build_gate(ReleaseSource.from_problem(problem), plan, "test")
        query = problem.query(plan, measuring=True)
        alone = gate.measure(problem.backend.execute, query, union=False)
        both = gate.measure(problem.backend.execute, query)
    assert alone.union is None and alone.k == both.k == 10
    assert both.union is not None and both.union.k == 1


def test_another_recipient_holds_only_its_own_releases(tmp_path: Path, run: Callable[..., Result]) -> None:
    spec = write(tmp_path)
    release(run, spec, A, "a.parquet")
    other = write(tmp_path, 'recipient = "study-42"')
    release(run, other, B, "b.parquet")
    summary = run("ledger", other, "--json")
    recipients = {r["recipient"]: r for r in json.loads(summary.stdout)["recipients"]}
    assert set(recipients) == {"default", "study-42"}
    assert recipients["study-42"]["union_k"] == 10 and recipients["default"]["union_k"] == 10
    # study-42 now holds B: A to it is refused, naming B
    refused = release(run, other, A, "a-to-42.parquet", 2)
    assert "to study-42" in refused.stderr


def test_accept_risk_releases_the_union_and_records_it(tmp_path: Path, run: Callable[..., Result]) -> None:
    spec = write(tmp_path)
    release(run, spec, A, "a.parquet")
    release(run, spec, B, "b.parquet", 0, "--accept-risk", "data-use agreement 17 allows linkage")
    record = json.loads((tmp_path / "b.parquet.release.json").read_text(encoding="utf-8"))
    assert record["gate"]["verdict"] == "accepted" and record["figures"]["union"]["k"] == 1
    assert record["ledger"]["entry"] == 2 and record["ledger"]["earlier"] == 1
    listed = run("ledger", spec)
    assert "default: 2 releases, 100 persons, union k = 1" in listed.stdout


def test_a_release_nobody_can_link_is_not_recorded(tmp_path: Path, run: Callable[..., Result]) -> None:
    spec = write(tmp_path, roles='drop = ["patient_id"]')
    release(run, spec, A, "a.parquet")
    release(run, spec, B, "b.parquet")  # no pseudonym: nothing links the two
    assert not (tmp_path / "deid-sql-ledger.duckdb").exists()
    assert "ledger" not in json.loads((tmp_path / "b.parquet.release.json").read_text(encoding="utf-8"))
    checked = run("ledger", spec, "--verify", "--release", tmp_path / "b.parquet.release.json", expect=1)
    assert "the release was not recorded in a ledger (it carries no pseudonym)" in checked.stdout


def test_the_ledger_is_owner_only_and_holds_no_key_or_raw_value(tmp_path: Path, run: Callable[..., Result]) -> None:
    spec = write(tmp_path)
    release(run, spec, A, "a.parquet")
    path = tmp_path / "deid-sql-ledger.duckdb"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    raw = path.read_bytes()
    assert KEY.encode() not in raw and b"P000" not in raw and b"P042" not in raw
    with Ledger(path, create=False) as ledger:
        (entry,) = ledger.entries()
    assert entry.key_fingerprint == key_fingerprint(KEY.encode()) and KEY not in json.dumps(entry.body())


def test_an_edited_or_removed_entry_breaks_the_chain(tmp_path: Path, run: Callable[..., Result]) -> None:
    spec = write(tmp_path)
    release(run, spec, A, "a.parquet")
    release(run, write(tmp_path, 'recipient = "r2"'), B, "b.parquet")
    spec = write(tmp_path)
    assert "hash chain: whole" in run("ledger", spec, "--verify").stdout
    path = tmp_path / "deid-sql-ledger.duckdb"
    con = duckdb.connect(str(path))
    con.execute("UPDATE ledger_persons SET label = 1 - label WHERE seq = 1 AND pseudonym = "
                "(SELECT min(pseudonym) FROM ledger_persons WHERE seq = 1)")
    con.close()
    broken = run("ledger", spec, "--verify", expect=1)
    assert "entry 1: its persons or labels were edited" in broken.stdout
    con = duckdb.connect(str(path))
    con.execute("DELETE FROM ledger_entries WHERE seq = 1")
    con.close()
    refused = release(run, spec, A, "a2.parquet", 2)
    assert "fails its hash chain" in refused.stderr and "a2.parquet" not in os.listdir(tmp_path)


def test_the_last_entry_removed_is_found_by_the_release_that_names_it(tmp_path: Path,
                                                                      run: Callable[..., Result]) -> None:
    """A hash chain cannot show that its last entry was removed (the ledger as it was before it is
    whole); the release's record names its entry and hash, so --verify --release finds it."""
    spec = write(tmp_path)
    release(run, spec, A, "a.parquet")
    ledger = tmp_path / "deid-sql-ledger.duckdb"
    before = ledger.read_bytes()
    release(run, spec, A, "a2.parquet")
    assert run("ledger", spec, "--verify", "--release", tmp_path / "a2.parquet.release.json").exit_code == 0
    ledger.write_bytes(before)  # the ledger as it was: entry 2 gone, the chain whole
    assert "hash chain: whole" in run("ledger", spec, "--verify").stdout
    found = run("ledger", spec, "--verify", "--release", tmp_path / "a.parquet.release.json",
                "--release", tmp_path / "a2.parquet.release.json", expect=1)
    assert "a2.parquet.release.json: its entry 2 is not in the ledger" in found.stdout
    assert "a.parquet.release.json" not in found.stdout  # entry 1 is there, as recorded
    sidecar = tmp_path / "a.parquet.release.json"
    record = json.loads(sidecar.read_text(encoding="utf-8"))
    record["figures"]["k"] = 99
    sidecar.write_text(json.dumps(record), encoding="utf-8")
    edited = run("ledger", spec, "--verify", "--release", sidecar, expect=1)
    assert "the record differs from the one entry 1 was written with" in edited.stdout
    assert "give --verify too" in run("ledger", spec, "--release", sidecar, expect=2).stderr
    (tmp_path / "broken.release.json").write_text("{not json", encoding="utf-8")
    broken = run("ledger", spec, "--verify", "--release", tmp_path / "broken.release.json", expect=2)
    assert "not a release record" in broken.stderr and len(broken.stderr.strip().splitlines()) == 1


def test_a_ledger_of_another_key_is_refused(tmp_path: Path, run: Callable[..., Result],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    spec = write(tmp_path)
    release(run, spec, A, "a.parquet")
    monkeypatch.setenv("DEID_LEDGER_KEY", KEY[::-1])
    refused = release(run, spec, A, "a2.parquet", 2)
    assert "made under another key" in refused.stderr and KEY not in refused.stderr


@pytest.mark.parametrize(("line", "words"), [
    ('recipient = "study 42/x"', "recipient = 'study 42/x' must be 1 to 64 letters"),
    ("recipient = 7", "recipient = 7 must be"),
    ('ledger = ""', "ledger = '' must be a file path"),
    ('ledger_table = "audit.deid_ledger"', "ledger_table keeps the ledger as tables on PostgreSQL, but this spec "
                                           "runs on duckdb"),
    ('ledger_table = "a.b.c.d"', "ledger_table 'a.b.c.d' has 4 parts"),
    ('ledger_table = "x"\nledger = "l.duckdb"', "gives both ledger (a file) and ledger_table"),
])
def test_bad_ledger_settings_are_one_line(tmp_path: Path, run: Callable[..., Result], line: str, words: str) -> None:
    spec = write(tmp_path, line)
    result = run("validate", spec, expect=2)
    assert words in result.stderr and "Traceback" not in result.stderr


def test_a_set_is_one_entry_and_a_ledger_inside_its_folder_is_refused(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import test_linked

    monkeypatch.setenv("DEID_LINK_KEY", test_linked.KEY)
    spec = test_linked.write(tmp_path, test_linked.tables())
    runner = CliRunner()
    result = runner.invoke(cli, ["materialize", str(spec), "--policy", "age:every=20", "--out", str(tmp_path / "r1")])
    assert result.exit_code == 0, result.output
    with Ledger(tmp_path / "deid-sql-ledger.duckdb", create=False) as ledger:
        (entry,) = ledger.entries()
    assert entry.persons == 60 and entry.target.startswith("set ")
    record = json.loads((tmp_path / "r1" / "release.json").read_text(encoding="utf-8"))
    assert record["ledger"]["entry"] == 1 and record["ledger"]["link"] == "patient_id"
    # a second set to the same recipient, with ages by single years: judged on the union with r1
    result = runner.invoke(cli, ["materialize", str(spec), "--policy", "age:bottom", "--out", str(tmp_path / "r2"),
                                 "--accept-risk", "the same analysts, who hold r1 already"])
    assert result.exit_code == 0, result.output
    union = json.loads((tmp_path / "r2" / "release.json").read_text(encoding="utf-8"))["figures"]["union"]
    assert union["linked_persons"] == 60 and union["k"] == 1
    inside = spec.read_text(encoding="utf-8").replace("[release]\n", '[release]\nledger = "r3/ledger.duckdb"\n')
    spec.write_text(inside, encoding="utf-8")
    result = runner.invoke(cli, ["materialize", str(spec), "--policy", "age:every=20", "--out", str(tmp_path / "r3")])
    assert result.exit_code == 2 and "inside the folder the release is written to" in result.output
    assert not (tmp_path / "r3").exists()


# -- the union's figures against a pure-Python reference -------------------------------------------------


def _reference(persons: list[tuple[int, ...]], current: Recoding, earlier: list[tuple[Recoding, dict[int, bool]]],
               census: dict[tuple[int, ...], int] | None) -> tuple[int, float]:
    """k and Σ 1/g over the combined labels, by sets of positions (every earlier release: its recoding
    and who of the persons it held)."""
    def label(rec: Recoding, pos: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(int(q.group_of[p]) for q, p in zip(rec.qis, pos))

    combined = []
    for i, pos in enumerate(persons):
        combined.append((label(current, pos),) + tuple(label(rec, pos) if held[i] else None for rec, held in earlier))
    m = {c: combined.count(c) for c in set(combined)}
    total = 0.0
    for i, pos in enumerate(persons):
        c = combined[i]
        g = float(m[c])
        if census is not None:
            region = [{p for p in range(len(q.group_of)) if q.group_of[p] == q.group_of[pos[j]]}
                      for j, q in enumerate(current.qis)]
            for rec, held in earlier:
                if held[i]:
                    for j, q in enumerate(rec.qis):
                        region[j] &= {p for p in range(len(q.group_of)) if q.group_of[p] == q.group_of[pos[j]]}
            people = sum(n for cell, n in census.items() if all(cell[j] in region[j] for j in range(len(region))))
            g = max(float(people), g)
        total += 1.0 / g
    return min(m.values()), total


def _recoding(domains: list[IntegerDomain], groups: list[list[int]]) -> Recoding:
    return Recoding(tuple(QIRecoding.from_groups(d, g, None) for d, g in zip(domains, groups)))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_union_figures_equal_a_pure_python_reference(tmp_path_factory: pytest.TempPathFactory,
                                                     data: st.DataObject) -> None:
    sizes = data.draw(st.lists(st.integers(2, 5), min_size=1, max_size=2))
    domains = [IntegerDomain(0, s - 1) for s in sizes]
    n = data.draw(st.integers(3, 25))
    persons = [tuple(data.draw(st.integers(0, s - 1)) for s in sizes) for _ in range(n)]
    partition = st.lists(st.integers(0, 2), min_size=1, max_size=1)

    def recoding() -> Recoding:
        return _recoding(domains, [data.draw(st.lists(st.integers(0, 2), min_size=s, max_size=s)) for s in sizes])

    del partition
    current = recoding()
    with_census = data.draw(st.booleans())
    census = ({cell: 1 + data.draw(st.integers(0, 3)) for cell in set(persons)} if with_census else None)
    folder = tmp_path_factory.mktemp("ledger")
    ledger = Ledger(folder / "l.duckdb")
    names = [f"q{j}" for j in range(len(sizes))]
    pseudonyms = [str(pseudonym(b"ledger-test-key", f"p{i}")) for i in range(n)]
    earlier_refs = []
    entries = []
    for e in range(data.draw(st.integers(0, 3))):
        rec = recoding()
        held = {i: data.draw(st.booleans()) for i in range(n)}
        earlier_refs.append((rec, held))
        shown = [i for i in range(n) if held[i]]
        groups = np.array([[int(q.group_of[persons[i][j]]) for j, q in enumerate(rec.qis)] for i in shown],
                          dtype=np.int64).reshape(len(shown), len(sizes))
        entry = Entry(seq=0, recipient="r", release=f"r{e}", created_at="t", key_fingerprint="f", spec="s",
                      spec_sha256=None, policy="p", record_sha256="h", target="t", persons=len(shown), rows=0, held=0,
                      qis=ledger_qis(rec, names), content_sha256="", previous="", hash="")
        entries.append(ledger.append(entry, Released(pa.array([pseudonyms[i] for i in shown], pa.string()), groups)))
    assert not ledger.verify()
    # a person's row shown twice (the same tuple) takes the path of persons with several rows: the same figures
    repeated = data.draw(st.sets(st.integers(0, n - 1), max_size=2))
    shown_rows = list(range(n)) + sorted(repeated)
    cur = Released(pa.array([pseudonyms[i] for i in shown_rows], pa.string()),
                   np.array([[int(q.group_of[persons[i][j]]) for j, q in enumerate(current.qis)] for i in shown_rows],
                            dtype=np.int64))
    if census is not None:
        cells = Cells(np.array(list(census), dtype=np.int32), np.array(list(census.values()), dtype=np.int64))

        def census_of(rec: Recoding) -> Census:
            return Census.from_cells(rec, cells, n)
    union, _ = union_figures(cur, ledger_qis(current, names), current, entries, ledger, "r",
                             census_of if census is not None else None, PopulationRisk(), 1.0, 0,
                             float(sum(census.values())) if census else float(n))
    ledger.close()
    k, risk_sum = _reference(persons, current, earlier_refs, census)
    assert union.k == k
    assert union.risk_sum == pytest.approx(risk_sum)


def test_the_attribute_criteria_judge_the_combined_labels(tmp_path: Path, run: Callable[..., Result]) -> None:
    """200 persons in pairs, each pair alone in its (age band, ZIP): alone, each release's groups hold
    twenty persons of mixed diagnoses; combined, the first pair is two persons who both carry B20."""
    with (tmp_path / "src.csv").open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["patient_id", "age", "zip", "dx"])
        for p in range(200):
            pair = p // 2
            dx = "B20" if pair == 0 else ("J45" if p % 2 else "I10")
            out.writerow([f"P{p:03d}", 10 * (pair // 10) + 3, ZIPS[pair % 10], dx])
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(zips=", ".join(f'"{z}"' for z in ZIPS),
                                roles='pseudonymize = ["patient_id"]\nsecret_env = "DEID_LEDGER_KEY"',
                                release="max_confidence = 0.8").replace("min_k = 10", "min_k = 2"),
                    encoding="utf-8")
    release(run, spec, A, "a.parquet")
    refused = release(run, spec, B, "b.parquet", 2)
    assert "with the 1 earlier release to default" in refused.stderr
    assert "dx: group combined labels age 0-99, zip Z0; earlier 20" in refused.stderr
    assert ": age 0-9, zip Z0|" in refused.stderr
    assert "'B20' for 2 of 2" in refused.stderr and "k 2" not in refused.stderr  # k holds; the values do not
    release(run, spec, B, "b.parquet", 0, "--accept-risk", "the analysts hold a data-use agreement for linkage")
    record = json.loads((tmp_path / "b.parquet.release.json").read_text(encoding="utf-8"))
    (dx,) = record["figures"]["union"]["attribute"]
    assert dx["column"] == "dx" and dx["max_confidence"] == 1.0
    assert record["figures"]["attribute"][0]["max_confidence"] < 0.8  # alone, B passes


def test_the_report_shows_what_the_recipient_already_holds(tmp_path: Path, run: Callable[..., Result]) -> None:
    spec = write(tmp_path)
    release(run, spec, A, "a.parquet")
    release(run, spec, A, "a2.parquet")
    # a report of the second release judges it with what the recipient held then: A, not itself
    run("report", spec, "--from-release", tmp_path / "a2.parquet.release.json", "--out", tmp_path / "a2.html")
    report = json.loads((tmp_path / "a2.json").read_text(encoding="utf-8"))
    union = report["risk"]["union"]
    first = json.loads((tmp_path / "a.parquet.release.json").read_text(encoding="utf-8"))
    assert union["earlier"] == [f"{first['created_at']}/{union['earlier'][0].split('/')[1]}"] and union["k"] == 10
    assert 'id="union-heading"' in (tmp_path / "a2.html").read_text(encoding="utf-8")
    # a report of B before it is released: the union's k, and a caution that says it
    run("report", spec, "--policy", B, "--out", tmp_path / "b.html", expect=None)
    report = json.loads((tmp_path / "b.json").read_text(encoding="utf-8"))
    assert report["risk"]["union"]["k"] == 1 and len(report["risk"]["union"]["earlier"]) == 2
    caution = next(c for c in report["summary"]["cautions"] if c["kind"] == "union")
    assert "the smallest group is 1 (this release alone: 10)" in caution["text"]


def test_a_ledger_in_use_by_another_run_is_one_line(tmp_path: Path, run: Callable[..., Result]) -> None:
    import subprocess
    import sys

    spec = write(tmp_path)
    release(run, spec, A, "a.parquet")
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "print('held', flush=True); time.sleep(60)", str(tmp_path / "deid-sql-ledger.duckdb")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        busy = release(run, spec, A, "a2.parquet", 2)
        assert "is in use by another run" in busy.stderr and "a2.parquet" not in os.listdir(tmp_path)
    finally:
        holder.kill()
        holder.wait()


def test_anonymize_out_is_recorded_with_its_levels(tmp_path: Path, run: Callable[..., Result]) -> None:
    spec = write(tmp_path)
    run("anonymize", spec, "--out", tmp_path / "an.parquet")
    with Ledger(tmp_path / "deid-sql-ledger.duckdb", create=False) as ledger:
        (entry,) = ledger.entries("default")
    record = json.loads((tmp_path / "an.parquet.release.json").read_text(encoding="utf-8"))
    assert entry.policy == f"levels {record['policy']['levels']}" and record["ledger"]["entry"] == entry.seq
    # the optimum hid age; the same recipient asking for ZIPs hidden and ages kept is judged on both
    refused = release(run, spec, "age:bottom|zip:top", "b.parquet", 2)
    assert "with the 1 earlier release to default" in refused.stderr


def test_a_ledger_table_on_spark_is_refused_before_any_engine(tmp_path: Path) -> None:
    """A Spark catalog has no grants to keep the ledger's tables owner-only: the spec is refused as it is
    read, in one line, before Spark is started."""
    from deid_sql.errors import SpecError
    from deid_sql.spec.file import Spec

    spec = tmp_path / "spark.toml"
    spec.write_text('population = "sample"\n[backend]\nengine = "spark"\n[source]\ntable = "default.src"\n'
                    '[[qi]]\nname = "age"\nkind = "integer"\nmin = 0\nmax = 9\n[columns]\npseudonymize = ["pid"]\n'
                    'secret_env = "DEID_LEDGER_KEY"\n[release]\nmin_k = 2\nledger_table = "audit.deid_ledger"\n',
                    encoding="utf-8")
    with pytest.raises(SpecError) as refused:
        Spec.read(spec)
    line = str(refused.value)
    assert "\n" not in line and "runs on spark: a Spark catalog has no grants to keep its tables owner-only" in line
