"""``deid-sql init`` on any column name (issue 38): a column named ``C1/C2`` crashed it with an
internal error, since it builds a hierarchy file's name from the column's.  Whatever the names —
slashes, backslashes, ``..``, quotes, leading dots, unicode, very long, equal but for case, blank —
init writes a spec that ``validate`` accepts, or refuses in one line (exit 2), never a traceback."""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

ROWS = 60
# characters a Parquet column name may hold (no surrogates, no NUL: Arrow's names are UTF-8 C strings)
CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
HOSTILE = st.sampled_from(["/", "\\", "..", ".", '"', "'", "\t", "\n", " ", "#", "*", "?", ":", "|", "%", "$(x)",
                           "é", "日本", "🙂", "\u200b", "e\u0301", "../", "..\\", "~", "CON", "-", "="])
PIECE = st.one_of(st.text(CHARS, max_size=8), HOSTILE)
# a name may carry a word init takes for a QI (so hostile names become QIs, with hierarchies looked up)
NAME = st.one_of(st.text(CHARS, min_size=1, max_size=24), st.builds(lambda a, w, b: a + w + b, PIECE,
                                                                       st.sampled_from(["age", "sex", "zip", "race",
                                                                                        "birth date", "Age", "SEX"]),
                                                                       PIECE),
                 st.builds(lambda a: a * 300, st.sampled_from(["x", "/", "é"])), st.just(""))


def _column(i: int, name: str) -> pa.Array:
    """Data that fits the name's QI word when it has one, else a cycle of ages, sexes, ZIPs, dates."""
    lowered = name.lower()
    kind = next((k for k in ("birth", "age", "sex", "zip", "race") if k in lowered),
                ("age", "sex", "zip", "birth")[i % 4])
    if kind == "age":
        return pa.array([18 + (7 * r) % 70 for r in range(ROWS)])
    if kind == "sex":
        return pa.array(["F" if r % 2 else "M" for r in range(ROWS)])
    if kind == "zip":
        return pa.array([f"{2134 + r % 5:05d}" for r in range(ROWS)])
    if kind == "race":
        return pa.array([("A", "B", "C")[r % 3] for r in range(ROWS)])
    return pa.array([dt.date(1950, 1, 1) + dt.timedelta(days=97 * r) for r in range(ROWS)])


def _init_then_validate(folder: Path, names: list[str], run) -> None:  # noqa: ANN001
    """init, then validate: a spec validate accepts (a QI is always there to propose: a column
    ``patient age`` is added), or a one-line refusal and no spec."""
    if "patient age" not in {n.lower() for n in names}:
        names = [*names, "patient age"]
    data = folder / "data.parquet"
    pq.write_table(pa.table({name: _column(i, name) for i, name in enumerate(names)}), data)
    for name in names[:2]:  # a hierarchy file beside the data, ARX's way, where a name can be a file name
        try:
            (folder / f"data_hierarchy_{name}.csv").write_text("F;*\nM;*\n", encoding="utf-8")
        except (OSError, ValueError):
            pass
    done = run("init", data, expect=None)
    assert "Traceback" not in done.output and "internal error" not in done.output, done.output
    if done.exit_code != 0:  # a refusal: one line, nothing written
        lines = done.stderr.splitlines()
        assert done.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), done.stderr
        assert not (folder / "data.toml").exists()
        return
    checked = run("validate", folder / "data.toml", expect=None)
    assert checked.exit_code == 0, (names, checked.output, (folder / "data.toml").read_text(encoding="utf-8"))


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(NAME, min_size=1, max_size=5, unique=True))
@example(["C1/C2"])  # the crash
@example(["age/x", "a\\b", "..", ".hidden", 'qu"ote', "Sex", "sex", "  ", "x" * 300])
@example(["../../etc/age", "sex\\..\\zip", "/", "\\"])
@example(["age", "AGE", "age_1", "", " "])
def test_init_gives_a_spec_validate_accepts_or_one_line_whatever_the_column_names(run, names: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _init_then_validate(Path(tmp), names, run)


def test_a_column_named_with_a_slash_gets_a_working_spec(run, tmp_path: Path) -> None:
    """The issue's case in the fast suite: ``C1/C2`` and an age named ``age/years`` beside it."""
    _init_then_validate(tmp_path, ["C1/C2", "age/years", "sex\\code"], run)
    assert (tmp_path / "data.toml").exists()
