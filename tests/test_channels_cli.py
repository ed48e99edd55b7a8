"""``deid-sql channels``: the command, the written release and its composition, and bad input.

Releases are checked here independently of the library's own check: the written rows
are joined back to the source on the identity columns with DuckDB, P(v^k | w) is
recomputed by eq. 1 in exact fractions from the composition of each output channel,
and (6) and (8) are asserted, together with inclusiveness (every subject's output
channel contains its true input channel) and the planned counts.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from click.testing import Result

from deid_sql.channels.job import solve
from deid_sql.channels.write import summary, write_release

# deid_sql.fixtures is first- or third-party depending on the ruff config: pin it here.
# isort: off
from deid_sql.fixtures.channels import (
    DH,
    DHM,
    DIABETES,
    HEART,
    RELATED,
    TABLE1,
    simulate,
    simulated_spec,
    write_simulated,
    write_table1,
)
# isort: on

Run = Callable[..., Result]
IDENTITY = ("name", "postal_code", "gender")
TABLE1_U = {DIABETES: Fraction("0.25"), HEART: Fraction("0.25"), DH: Fraction("0.30"), DHM: Fraction("0.18")}


# -- helpers ---------------------------------------------------------------------------------------------------

def no_temp_files(folder: Path) -> None:
    leftovers = [p.name for p in folder.rglob("*") if p.name.endswith((".tmp", ".wal")) or p.name.startswith(".")]
    assert leftovers == []


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def q(name: str) -> str:
    """A DuckDB identifier, quoted."""
    return '"' + name.replace('"', '""') + '"'


def lit(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def toml_str(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(value, ensure_ascii=False)


def read_text_csv(path: Path) -> pa.Table:
    """A CSV with every column read as text (labels and codes must not be re-typed)."""
    names = pacsv.read_csv(path).column_names
    return pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(column_types={n: pa.string() for n in names}))


def relation(path: Path) -> str:
    """A DuckDB table function reading ``path`` (every column as text for CSV)."""
    if path.suffix == ".csv":
        return f"read_csv({lit(str(path))}, header = true, all_varchar = true)"
    return f"read_parquet({lit(str(path))})"


def sorted_rows(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted(tuple(str(v) for v in row.values()) for row in table.to_pylist())


def verify_release(released: pa.Table, source: str, composition: pa.Table, identity: Sequence[str],
                   related: Sequence[str], confidential: str, u: dict[str, Fraction], b: Fraction | None = None,
                   c: dict[str, Fraction] | None = None, label: str = "output_channel",
                   slack: Fraction = Fraction(0)) -> Verified:
    """Join the ``released`` rows back to ``source`` (a DuckDB relation) on ``identity``; assert one release row per
    source row, inclusiveness, the composition's counts, and (6)/(8) by eq. 1 in exact arithmetic.
    Returns P(v | w) per output channel label and the release's Ψ (eq. 11) recomputed from the rows."""
    con = duckdb.connect()
    try:
        con.register("released_rows", released)
        keys = ", ".join(f"CAST(src.{q(c_)} AS VARCHAR)" for c_ in related)
        on = " AND ".join(f"rel.{q(i)} IS NOT DISTINCT FROM src.{q(i)}" for i in identity)
        n_source = con.execute(f"SELECT count(*) FROM {source}").fetchone()[0]
        assert released.num_rows == n_source
        joined = con.execute(f"SELECT rel.{q(label)}, {keys}, CAST(src.{q(confidential)} AS VARCHAR), count(*) "
                         f"FROM released_rows AS rel JOIN {source} AS src ON {on} GROUP BY ALL").fetchall()
        per_source = con.execute(f"SELECT {', '.join(q(i) for i in identity)}, count(*) AS n FROM {source} "
                             f"GROUP BY ALL HAVING count(*) > 1").fetchall()
        assert per_source == [], "identity must name one source row each for this check"
    finally:
        con.close()
    assert sum(row[-1] for row in joined) == n_source  # every released row met exactly one source row
    m: dict[tuple[str, ...], Counter[str]] = {}
    x: dict[str, Counter[tuple[str, ...]]] = {}
    for row in joined:
        w, key, value, n = row[0], tuple(row[1:-2]), row[-2], row[-1]
        m.setdefault(key, Counter())[value] += n
        x.setdefault(w, Counter())[key] += n
    members: dict[str, set[tuple[str, ...]]] = {}
    planned: dict[tuple[str, tuple[str, ...]], int] = {}
    totals: dict[str, int] = {}
    for row in composition.to_pylist():
        key = tuple(str(row[c_]) for c_ in related)
        members.setdefault(row["output_channel"], set()).add(key)
        planned[(row["output_channel"], key)] = int(row["subjects_from_input"])
        totals[row["output_channel"]] = int(row["output_subjects"])
    probabilities: dict[str, dict[str, Fraction]] = {}
    for w, sent in x.items():
        assert set(sent) <= members[w], f"{w}: a subject landed in an output channel without its input channel"
        for key, n in sent.items():
            assert planned[(w, key)] == n
        assert sum(sent.values()) == totals[w]
        size = sum(sent.values())
        p = {v: sum(Fraction(n * m[key][v], sum(m[key].values())) for key, n in sent.items()) / size
             for v in u}  # eq. 1
        probabilities[w] = p
        for v, bound in u.items():
            assert p[v] <= bound + slack, f"(6) breaks in {w} for {v!r}: {float(p[v])} > {float(bound)}"
        if b is not None:
            weighted = sum((c or {}).get(v, Fraction(1)) * p[v] for v in u)
            assert weighted <= b + slack, f"(8) breaks in {w}: {float(weighted)} > {float(b)}"
    assert {w for w, n in totals.items() if n} == set(x)
    size_of = {key: sum(values.values()) for key, values in m.items()}
    psi = sum(sum(size_of[key] for key in members[w]) * sum(sent.values())  # ψ_w m_w; singletons cost nothing
              for w, sent in x.items() if len(members[w]) > 1)
    return Verified(probabilities, psi)


@dataclass(frozen=True)
class Verified:
    probabilities: dict[str, dict[str, Fraction]]  # P(v | w) by eq. 1, per output channel label
    psi: int  # Ψ of the written release


def refused(run: Run, folder: Path, args: Iterable[object], fragment: str) -> str:
    """The command exits 2 with one ``error:`` line holding ``fragment``; nothing is written or changed."""
    before = files(folder)
    result = run("channels", *args, expect=2)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert fragment in lines[0], lines[0]
    assert "Traceback" not in result.output
    assert files(folder) == before
    no_temp_files(folder)
    return lines[0]


@pytest.fixture
def study(tmp_path: Path) -> Path:
    """Table 1 and its spec in ``tmp_path/study``."""
    write_table1(tmp_path / "study")
    return tmp_path / "study"


def edit(spec: Path, old: str, new: str) -> Path:
    text = spec.read_text(encoding="utf-8")
    assert old in text, old
    spec.write_text(text.replace(old, new, 1), encoding="utf-8")
    return spec


def write_rows(path: Path, header: Sequence[str], rows: Iterable[Sequence[object]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


# -- the command on Table 1 --------------------------------------------------------------------------------------

def test_prints_the_plan_and_writes_the_release(run: Run, study: Path) -> None:
    out, report = study / "release.parquet", study / "report.json"
    result = run("channels", study / "table1.toml", "--out", out, "--figures", report)
    text = result.stdout
    for fragment in ("risky input channels: 3 of 6", "program:", "Ω", "time", "Ψ = 65", "(H, H, H, V)",
                     "MILP, proven optimal", "check: (6) and (8) hold"):
        assert fragment in text, fragment
    assert result.stderr == ""
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["lp"]["psi"] == pytest.approx(187 / 3)
    assert data["lp"]["omega"] == pytest.approx(187 / 3 / 225)
    assert data["release"]["psi"] == pytest.approx(65)
    assert data["release"]["omega"] == pytest.approx(65 / 225)
    assert data["risky_input_channels"] == 3 and data["output_channels"] == 53 and data["subjects"] == 15
    assert data["check"]["max_p_minus_u"] <= 1e-9 and data["check"]["max_weighted_minus_b"] <= 1e-9
    released = pq.read_table(out)
    assert released.column_names == [*IDENTITY, "output_channel"]
    assert released.num_rows == 15
    comp = read_text_csv(study / "release.channels.csv")
    assert comp.column_names == ["output_channel", *RELATED, "subjects_from_input", "output_subjects"]
    checked = verify_release(pq.read_table(out), relation(study / "table1.csv"), comp, IDENTITY, RELATED,
                             "diagnosis", TABLE1_U, Fraction("0.6"))
    assert checked.psi == 65
    assert sorted(tuple(sorted(v for v in d.values())) for d in checked.probabilities.values()) == sorted([
        (0, 0, 0, Fraction(1, 4)),  # {3} alone: M. G.'s Heart
        (0, Fraction(1, 7), Fraction(1, 7), Fraction(2, 7)),  # {1, 2, 6}
        (0, 0, Fraction(1, 4), Fraction(1, 4)),  # {4, 5}
    ])
    no_temp_files(study)


def test_plan_only_writes_nothing(run: Run, study: Path) -> None:
    before = files(study)
    result = run("channels", study / "table1.toml")
    assert "release (MILP, proven optimal): Ψ = 65" in result.stdout
    assert files(study) == before


def test_summary_matches_the_job(study: Path) -> None:
    with solve(study / "table1.toml") as job:
        data = summary(job)
        assert data["release"]["psi"] == job.whole.objective == pytest.approx(65)
        assert data["lp"]["omega"] == pytest.approx(job.lp.objective / 225)
        assert data["release"]["used_output_channels"] == 2
        assert data["values"][DH] == {"prior": pytest.approx(0.2), "u": pytest.approx(0.3), "c": 1.0}
        assert "check" not in data


def test_every_row_lands_in_an_output_channel_with_its_input_channel(run: Run, tmp_path: Path) -> None:
    """Figure-6 weights split input channels; the rows still follow the plan exactly."""
    spec = write_table1(tmp_path / "heavy", c34=1.25)
    out = tmp_path / "heavy" / "release.csv"
    run("channels", spec, "--out", out)
    released = read_text_csv(out)
    assert released.column_names == [*IDENTITY, "output_channel"]
    by_name = {row[0]: tuple(row[3:7]) for row in TABLE1}
    comp = read_text_csv(out.with_name("release.channels.csv")).to_pylist()
    members = {(r["output_channel"], tuple(r[c] for c in RELATED)) for r in comp}
    for row in released.to_pylist():
        assert (row["output_channel"], by_name[row["name"]]) in members
    with solve(spec) as job:
        plan = job.release
        got = Counter((row["output_channel"], by_name[row["name"]]) for row in released.to_pylist())
        want = {(plan.labels[w], job.inputs.keys[r]): n for (w, r), n in plan.subjects.items()}
        assert dict(got) == want
        assert job.whole.objective == pytest.approx(79)
    checked = verify_release(released, relation(tmp_path / "heavy" / "table1.csv"),
                   read_text_csv(out.with_name("release.channels.csv")), IDENTITY, RELATED, "diagnosis", TABLE1_U,
                   Fraction("0.6"), {DIABETES: Fraction(1), HEART: Fraction(1), DH: Fraction("1.25"),
                                     DHM: Fraction("1.25")})
    assert checked.psi == 79


@pytest.mark.slow
def test_duckdb_output_holds_release_and_composition(run: Run, study: Path) -> None:
    out = study / "release.duckdb"
    run("channels", study / "table1.toml", "--out", out, "--table", "rel")
    con = duckdb.connect(str(out), read_only=True)
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        assert tables == {"rel", "rel_channels", "rel__release"}
        released = con.sql("SELECT * FROM rel").to_arrow_table()
        comp = con.sql("SELECT * FROM rel_channels").to_arrow_table()
    finally:
        con.close()
    assert released.num_rows == 15 and released.column_names == [*IDENTITY, "output_channel"]
    assert sorted(comp.column("output_subjects").to_pylist()) == [4, 4, 4, 7, 7, 7]
    assert comp.column_names == ["output_channel", *RELATED, "subjects_from_input", "output_subjects"]
    verify_release(released, relation(study / "table1.csv"), comp, IDENTITY, RELATED, "diagnosis", TABLE1_U,
                   Fraction("0.6"))
    no_temp_files(study)


@pytest.mark.slow
def test_view_and_its_composition_view(run: Run, study: Path, tmp_path: Path) -> None:
    db = tmp_path / "analysts.duckdb"
    out = study / "release.parquet"
    run("channels", study / "table1.toml", "--out", out, "--view", "v", "--db", db, "--seed", 4)
    con = duckdb.connect(str(db), read_only=True)
    try:
        views = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
        assert views == {"v", "v_channels"}
        from_view = con.sql("SELECT * FROM v").to_arrow_table()
        comp = con.sql("SELECT * FROM v_channels").to_arrow_table()
    finally:
        con.close()
    assert from_view.column_names == [*IDENTITY, "output_channel"]
    assert sorted_rows(from_view) == sorted_rows(pq.read_table(out))
    assert sorted_rows(comp) == sorted_rows(read_text_csv(study / "release.channels.csv"))
    verify_release(from_view, relation(study / "table1.csv"), comp, IDENTITY, RELATED, "diagnosis", TABLE1_U,
                   Fraction("0.6"))
    run("channels", study / "table1.toml", "--view", "v", "--db", db, "--seed", 4, "--overwrite")


@pytest.mark.slow
def test_existing_view_is_refused_with_this_commands_flags(run: Run, study: Path, tmp_path: Path) -> None:
    """The hint must name options that ``channels`` has (--view, --overwrite), not ``view``'s old --name/--replace."""
    db = tmp_path / "analysts.duckdb"
    run("channels", study / "table1.toml", "--view", "v", "--db", db)
    result = run("channels", study / "table1.toml", "--view", "v", "--db", db, expect=2)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "already has" in lines[0]
    assert "--overwrite" in lines[0] and "--view" in lines[0], lines[0]
    assert "--replace" not in lines[0] and "--name" not in lines[0], lines[0]  # the old spellings of view


def taken_view_name(run: Run, study: Path, db: Path) -> Result:
    """Run with --out and --view v where ``v`` is already a table in ``db``."""
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE v AS SELECT 42 AS answer")
    con.close()
    result = run("channels", study / "table1.toml", "--out", study / "release.parquet", "--view", "v", "--db", db,
                 expect=2)
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: ")
    return result


def test_view_clash_leaves_no_release_file(run: Run, study: Path, tmp_path: Path) -> None:
    """write.py promises that a failure leaves nothing behind: no release, no composition file."""
    before = files(study)
    taken_view_name(run, study, tmp_path / "analysts.duckdb")
    assert sorted(files(study)) == sorted(before)
    assert files(study) == before
    no_temp_files(tmp_path)


def test_view_clash_leaves_no_composition_view(run: Run, study: Path, tmp_path: Path) -> None:
    db = tmp_path / "analysts.duckdb"
    taken_view_name(run, study, db)
    con = duckdb.connect(str(db), read_only=True)
    try:
        names = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    finally:
        con.close()
    assert names == {"v"}


@pytest.mark.slow
def test_same_seed_same_release(run: Run, tmp_path: Path) -> None:
    """Input channels split across output channels (Figure 6 weights), so the seeded hash order matters."""
    spec = write_table1(tmp_path / "heavy", c34=1.25)
    a, b = tmp_path / "heavy" / "a.parquet", tmp_path / "heavy" / "b.parquet"
    run("channels", spec, "--out", a, "--seed", 11)
    run("channels", spec, "--out", b, "--seed", 11)
    assert sorted_rows(pq.read_table(a)) == sorted_rows(pq.read_table(b))
    assert (a.with_name("a.channels.csv").read_bytes() == b.with_name("b.channels.csv").read_bytes())


def test_same_seed_same_release_on_simulated_data(tmp_path: Path) -> None:
    folder = simulated_study(tmp_path, 1.2, 0.3, seed=1, extra='integer = "never"\ncandidates = 300')
    outs = []
    for name in ("a", "b"):
        with solve(folder / "sim.toml", seed=5) as job:
            write_release(job, folder / f"{name}.parquet")
            outs.append(folder / f"{name}.parquet")
    assert sorted_rows(pq.read_table(outs[0])) == sorted_rows(pq.read_table(outs[1]))
    assert (folder / "a.channels.csv").read_bytes() == (folder / "b.channels.csv").read_bytes()


@pytest.mark.slow
def test_refuses_to_overwrite_an_existing_release(run: Run, study: Path) -> None:
    out = study / "release.parquet"
    out.write_bytes(b"keep me")
    refused(run, study, [study / "table1.toml", "--out", out], "already exists")
    run("channels", study / "table1.toml", "--out", out, "--overwrite")
    assert pq.read_table(out).num_rows == 15
    assert (study / "release.channels.csv").exists()


def test_refuses_to_write_over_the_source(run: Run, study: Path) -> None:
    refused(run, study, [study / "table1.toml", "--out", study / "table1.csv", "--overwrite"], "error")


def test_duckdb_table_clash_leaves_the_database_as_it_was(run: Run, study: Path) -> None:
    out = study / "release.duckdb"
    con = duckdb.connect(str(out))
    con.execute("CREATE TABLE released AS SELECT 42 AS answer")
    con.close()
    result = run("channels", study / "table1.toml", "--out", out, expect=2)
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: ")
    assert "already has a table or view named 'released'" in result.stderr, result.stderr
    con = duckdb.connect(str(out), read_only=True)
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        assert tables == {"released"}
        assert con.execute("SELECT * FROM released").fetchall() == [(42,)]
    finally:
        con.close()
    no_temp_files(study)


# -- awkward names and values ---------------------------------------------------------------------------------------

ODD_ID, ODD_NAME = 'patient "id"', "name's"
ODD_REL = ("select", "ü;from")
ODD_CONF = 'diag"nosis'
ODD_NONE = "none"
ODD_VALUES = ("Diabetes 'type 2'", 'He"art; select 1', "üble; DROP TABLE x; --")
ODD_CHANNELS = (("it's", "ü"), ('say "hi"', "DROP TABLE x; --"), ("a;b", "ü"), ("select", "from"),
                ("it's", "DROP TABLE x; --"))


def odd_study(folder: Path) -> Path:
    """A source whose column names and values are full of quotes, semicolons, unicode and SQL keywords."""
    folder.mkdir()
    plan = {  # channel -> confidential values of its subjects
        ODD_CHANNELS[0]: [ODD_VALUES[0]] * 3 + [ODD_NONE],
        ODD_CHANNELS[1]: [ODD_VALUES[1]] * 2 + [ODD_NONE] * 2,
        ODD_CHANNELS[2]: [ODD_NONE] * 8 + [ODD_VALUES[2]],
        ODD_CHANNELS[3]: [ODD_NONE] * 7 + [ODD_VALUES[0]],
        ODD_CHANNELS[4]: [ODD_NONE] * 5 + [ODD_VALUES[1], ODD_VALUES[2]],
    }
    rows = []
    names = ("O'Brien", 'Jo "JJ" Müller', "x; DROP TABLE y; --", "select * from t", "Zoë")
    for channel, values in plan.items():
        for value in values:
            i = len(rows)
            rows.append([i, f"{names[i % len(names)]} #{i}", *channel, value])
    write_rows(folder / "odd.csv", [ODD_ID, ODD_NAME, *ODD_REL, ODD_CONF], rows)
    spec = folder / "odd.toml"
    spec.write_text(f"""[source]
path = "odd.csv"

[channels]
related = [{", ".join(toml_str(c) for c in ODD_REL)}]
confidential = {toml_str(ODD_CONF)}
none = {toml_str(ODD_NONE)}
identity = [{toml_str(ODD_ID)}, {toml_str(ODD_NAME)}]
b = 0.9
candidates = "all"

[channels.weights]
{toml_str(ODD_VALUES[0])} = 1.5
""", encoding="utf-8")
    return spec


@pytest.mark.slow
def test_quotes_unicode_and_sql_keywords_round_trip(run: Run, tmp_path: Path) -> None:
    spec = odd_study(tmp_path / "odd")
    out = tmp_path / "odd" / "release.parquet"
    db = tmp_path / "odd" / "views.duckdb"
    result = run("channels", spec, "--out", out, "--view", "ödd 'v'", "--db", db)
    assert "risky input channels: " in result.stdout
    source = read_text_csv(tmp_path / "odd" / "odd.csv")
    released = pq.read_table(out)
    assert released.column_names == [ODD_ID, ODD_NAME, "output_channel"]
    assert sorted(released.column(ODD_NAME).to_pylist()) == sorted(source.column(ODD_NAME).to_pylist())
    assert sorted(map(str, released.column(ODD_ID).to_pylist())) == sorted(source.column(ODD_ID).to_pylist())
    comp = read_text_csv(out.with_name("release.channels.csv"))
    assert comp.column_names == ["output_channel", *ODD_REL, "subjects_from_input", "output_subjects"]
    assert {tuple(r[c] for c in ODD_REL) for r in comp.to_pylist()} == set(ODD_CHANNELS)
    with solve(spec) as job:
        assert set(job.inputs.keys) == set(ODD_CHANNELS)
        assert set(job.inputs.values) == {ODD_NONE, *ODD_VALUES}
        assert job.classes.risky.any()
        u = {v: Fraction(int(job.inputs.counts[:, k].sum()), job.inputs.total)
             for k, v in enumerate(job.inputs.values) if k}
    verify_release(pq.read_table(out), relation(tmp_path / "odd" / "odd.csv"), comp, [ODD_NAME], ODD_REL, ODD_CONF, u,
                   Fraction("0.9"), {ODD_VALUES[0]: Fraction("1.5")})
    con = duckdb.connect(str(db), read_only=True)
    try:
        from_view = con.sql(f"SELECT * FROM {q(chr(246) + 'dd ' + chr(39) + 'v' + chr(39))}").to_arrow_table()
        comp_view = con.sql(f"SELECT * FROM {q(chr(246) + 'dd ' + chr(39) + 'v' + chr(39) + '_channels')}")
        comp_rows = comp_view.to_arrow_table()
    finally:
        con.close()
    assert sorted_rows(from_view) == sorted_rows(released)
    assert sorted_rows(comp_rows) == sorted_rows(comp)


def test_a_source_column_named_like_a_helper_column_is_harmless(run: Run, study: Path) -> None:
    """Columns outside the spec are not released; one called ``deid_rank`` must not disturb the ranking."""
    text = (study / "table1.csv").read_text(encoding="utf-8").replace("postal_code", "deid_rank", 1)
    (study / "table1.csv").write_text(text, encoding="utf-8")
    edit(study / "table1.toml", 'identity = ["name", "postal_code", "gender"]', 'identity = ["name", "gender"]')
    out = study / "release.parquet"
    run("channels", study / "table1.toml", "--out", out)
    released = pq.read_table(out)
    assert released.column_names == ["name", "gender", "output_channel"]
    checked = verify_release(released, relation(study / "table1.csv"), read_text_csv(study / "release.channels.csv"),
                             ["name", "gender"], RELATED, "diagnosis", TABLE1_U, Fraction("0.6"))
    assert checked.psi == 65


def test_label_column_can_be_renamed(run: Run, tmp_path: Path) -> None:
    spec = write_table1(tmp_path / "lab", extra='label_column = "channel"')
    out = tmp_path / "lab" / "release.parquet"
    run("channels", spec, "--out", out)
    released = pq.read_table(out)
    assert released.column_names == [*IDENTITY, "channel"]
    assert set(released.column("channel").to_pylist()) == {"w1", "w2", "w3"}


# -- released data never breaks (6) or (8): the §7 simulation ----------------------------------------------------

def simulated_study(tmp_path: Path, rt: float, at_risk: float, seed: int, extra: str = "") -> Path:
    """2,000 subjects in 20 input channels (§7's data, small), u_k = 0.1·RT, b = 0.15·RT, c = (0.5, 1)."""
    folder = tmp_path / f"sim_{rt}_{at_risk}_{seed}"
    folder.mkdir()
    write_simulated(simulate(at_risk, subjects=2_000, channels=20, seed=seed), folder / "sim.parquet", seed=seed)
    (folder / "sim.toml").write_text(simulated_spec("sim.parquet", rt, extra), encoding="utf-8")
    return folder


@pytest.mark.slow
@pytest.mark.parametrize(("rt", "at_risk", "seed", "extra"), [
    (1.0, 0.15, 0, 'integer = "never"'),  # u = P(v), b = Σ c P(v): the tightest case, repairs merge into d_0
    (1.2, 0.3, 1, 'integer = "never"'),
    (1.5, 0.15, 0, 'integer = "never"\nseed = 3'),
    (1.2, 0.15, 2, 'integer = "always"\ntime_limit = 1\ncandidates = 200'),
])
def test_simulated_release_obeys_6_and_8(run: Run, tmp_path: Path, rt: float, at_risk: float, seed: int,
                                         extra: str) -> None:
    folder = simulated_study(tmp_path, rt, at_risk, seed, extra)
    out = folder / "release.parquet"
    run("channels", folder / "sim.toml", "--out", out, "--figures", folder / "report.json")
    u = {v: Fraction(f"{0.1 * rt:.4f}") for v in ("v1", "v2")}
    checked = verify_release(pq.read_table(out), relation(folder / "sim.parquet"),
                             read_text_csv(folder / "release.channels.csv"), ["subject_id"], ["lab_a", "lab_b"],
                             "diagnosis", u, Fraction(f"{0.15 * rt:.4f}"), {"v1": Fraction(1, 2), "v2": Fraction(1)},
                             slack=Fraction(1, 10**9))
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    assert report["release"]["psi"] == checked.psi
    assert report["lp"]["psi"] <= checked.psi + 1e-6
    assert report["release"]["omega"] == pytest.approx(checked.psi / 2_000**2)


# -- NULLs -------------------------------------------------------------------------------------------------------

def with_null_crp(study: Path) -> None:
    rows = [list(r) for r in TABLE1]
    rows[5][3] = ""  # F. J.'s CRP is missing
    write_rows(study / "table1.csv", ["name", "postal_code", "gender", *RELATED, "diagnosis"], rows)


def test_nulls_in_related_columns_are_refused(run: Run, study: Path) -> None:
    with_null_crp(study)
    refused(run, study, [study / "table1.toml", "--out", study / "release.parquet"],
            "rows with NULL in related column(s) 'crp'")


@pytest.mark.slow
def test_nulls_as_a_category_are_released(run: Run, study: Path) -> None:
    with_null_crp(study)
    edit(study / "table1.toml", 'candidates = "all"', 'candidates = "all"\nnulls = "category"\nnull_label = "?"')
    out = study / "release.parquet"
    run("channels", study / "table1.toml", "--out", out)
    comp = read_text_csv(study / "release.channels.csv")
    assert ("?", "N", "N", "N") in {tuple(r[c] for c in RELATED) for r in comp.to_pylist()}
    assert pq.read_table(out).num_rows == 15
    with solve(study / "table1.toml") as job:
        assert len(job.inputs.keys) == 7
        assert job.whole.violations() == []


@pytest.mark.slow
def test_null_confidential_values_are_refused_or_read_as_none(run: Run, study: Path, tmp_path: Path) -> None:
    rows = [list(r) for r in TABLE1]
    rows[3][7] = ""  # W. F.'s diagnosis is missing
    write_rows(study / "table1.csv", ["name", "postal_code", "gender", *RELATED, "diagnosis"], rows)
    refused(run, tmp_path, [study / "table1.toml", "--out", study / "release.parquet"],
            "rows with NULL in the confidential column 'diagnosis'")
    edit(study / "table1.toml", 'candidates = "all"', 'candidates = "all"\nconfidential_nulls = "none"')
    out = study / "release.parquet"
    run("channels", study / "table1.toml", "--out", out)
    assert pq.read_table(out).num_rows == 15
    with solve(study / "table1.toml") as job:
        assert job.whole.objective == pytest.approx(65)  # W. F. had no diagnosis anyway


# -- bad input: one error line, exit code 2, nothing written ---------------------------------------------------------

BAD_SPECS = {
    "confidential also related": ('related = ["crp", "cholesterol", "bp", "glucose"]',
                                  'related = ["crp", "cholesterol", "bp", "glucose", "diagnosis"]',
                                  "'diagnosis' is also listed in related"),
    "confidential also identity": ('identity = ["name", "postal_code", "gender"]',
                                   'identity = ["name", "postal_code", "gender", "diagnosis"]',
                                   "'diagnosis' is also listed in identity"),
    "u below P(v)": (f'"{DH}" = 0.30', f'"{DH}" = 0.1', "eq. 3 needs u_k >= P(v^k)"),
    "u above 1": (f'"{DH}" = 0.30', f'"{DH}" = 1.5', "it must lie in [P(v), 1]"),
    "b zero": ("b = 0.6", "b = 0", "b = 0 must be a positive number"),
    "b negative": ("b = 0.6", "b = -0.1", "b = -0.1 must be a positive number"),
    "none absent": ('none = "none"', 'none = "healthy"', "the none value 'healthy' does not occur in 'diagnosis'"),
    "no release possible": ("b = 0.6", "b = 0.4", "no release is possible"),
    "unknown key": ('candidates = "all"', 'candidates = "all"\ncolour = "blue"', "unknown key 'colour' in [channels]"),
    "listed channel not in data": ('candidates = "all"',
                                   'candidates = "all"\noutputs = [[["H", "H", "H", "V"], ["Z", "Z", "Z", "Z"]]]',
                                   "outputs #1 names input channel (Z, Z, Z, Z), which is not in the data"),
    "missing column": ('identity = ["name", "postal_code", "gender"]', 'identity = ["name", "phone"]',
                       "has no column 'phone'"),
    "weights without b": ("b = 0.6", "", "weights (c_k) only matter with b"),
    "negative weight": (f'[channels.weights]\n"{DH}" = 1.0', f'[channels.weights]\n"{DH}" = -1.0',
                        "weights must be >= 0"),
    "threshold for an unknown value": ("[channels.thresholds]", '[channels.thresholds]\n"Cancer" = 0.5',
                                       "names 'Cancer', which is not a confidential value in the data"),
    "related also identity": ('identity = ["name", "postal_code", "gender"]',
                              'identity = ["name", "postal_code", "gender", "crp"]', "column 'crp' is both related"),
    "label column is an identity column": ('candidates = "all"', 'candidates = "all"\nlabel_column = "name"',
                                           "label_column 'name' is also an identity column"),
}


@pytest.mark.parametrize("case", sorted(BAD_SPECS))
def test_bad_spec_is_refused(run: Run, study: Path, tmp_path: Path, case: str) -> None:
    old, new, fragment = BAD_SPECS[case]
    spec = edit(study / "table1.toml", old, new)
    refused(run, tmp_path, [spec, "--out", study / "release.parquet", "--figures", study / "report.json",
                            "--view", "v", "--db", study / "views.duckdb"], fragment)


def test_no_release_possible_names_the_values(run: Run, study: Path, tmp_path: Path) -> None:
    spec = edit(study / "table1.toml", "b = 0.6", "b = 0.4")
    line = refused(run, tmp_path, [spec, "--out", study / "release.parquet"], "no release is possible")
    assert f"'{DH}'" in line and "b = 0.4" in line


def test_empty_source_is_refused(run: Run, study: Path, tmp_path: Path) -> None:
    write_rows(study / "table1.csv", ["name", "postal_code", "gender", *RELATED, "diagnosis"], [])
    refused(run, tmp_path, [study / "table1.toml", "--out", study / "release.parquet"], "has no rows")


def test_more_candidates_than_can_exist_are_refused(run: Run, study: Path, tmp_path: Path) -> None:
    line = refused(run, tmp_path, [study / "table1.toml", "--candidates", 10_000, "--out", study / "r.parquet"],
                   "candidates = 10,000 but only 49 output channels can exist")
    assert "3 risky and 3 safe" in line


def test_a_fitting_candidate_count_is_accepted(run: Run, study: Path) -> None:
    result = run("channels", study / "table1.toml", "--candidates", 49, "--seed", 2)
    assert "candidates: 49 output channels" in result.stdout


def test_view_needs_db(run: Run, study: Path, tmp_path: Path) -> None:
    refused(run, tmp_path, [study / "table1.toml", "--view", "v", "--out", study / "release.parquet"],
            "--view and --db go together")


def test_release_sidecar_records_the_columns_and_the_check(run: Run, study: Path) -> None:
    """The channel release's own columns: identity released, related replaced, confidential not released."""
    from deid_sql.release.sidecar import read_sidecar, sidecar_path

    out = study / "release.parquet"
    run("channels", study / "table1.toml", "--out", out)
    record = read_sidecar(sidecar_path(out))
    roles = {c["name"]: c["role"] for c in record["columns"]}
    assert {roles[c] for c in IDENTITY} == {"identity (released)"}
    assert {roles[c] for c in RELATED} == {"related (replaced by the output channel)"}
    assert roles["diagnosis"] == "confidential (not released)"
    assert set(pq.read_table(out).column_names) == {*IDENTITY, "output_channel"}
    assert record["gate"]["verdict"] == "passed" and all(c["passed"] for c in record["gate"]["checks"])
    assert record["release"]["rows"] == pq.read_table(out).num_rows
    assert record["reproduce"]["command"].startswith("deid-sql channels ")


def test_identity_columns_cannot_be_dropped_or_pseudonymized(run: Run, study: Path) -> None:
    spec = study / "table1.toml"
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text + '\n[columns]\ndrop = ["name"]\n', encoding="utf-8")
    result = run("channels", spec, "--out", study / "release.parquet", expect=2)
    assert "publishes its identity columns as they are" in result.stderr
    assert not (study / "release.parquet").exists()
