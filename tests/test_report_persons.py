"""The verdict and the report say "persons" when they count persons (issue 31 on issue 29's unit).

With ``[person]`` every figure counts distinct persons, so every sentence that says what a figure
counts says persons: the CLI's verdict line, the page's visible text (headline, cautions, figures,
rules, charts' axes, the risk model), the gate's refusals; rows stay rows where rows are meant
(the table's rows, the rows blanked with the suppressed persons).  Without ``[person]`` every word
is what it was: the plain pages' lines that say "record" are compared with main's (golden file).
The JSON keys do not move ("records", "sample_uniques"): only words follow the unit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from deid_sql.cli import cli
from deid_sql.release.gate import Verdict
from deid_sql.release.unit import PERSONS, RECORDS, Unit
from deid_sql.report.release_html import render_html
from tests.report_sample import sample_report
from tests.test_persons import KEY, releasable, write

POLICY = "age:cuts=18,30,45,65,90|zip:digits=3"
GOLDEN = Path(__file__).parent / "golden" / "plain_report_records.txt"
#: "record" where a page may say it although it counts persons: the set's record file, a frontier
#: run's record of its baselines (neither is a count)
ALLOWED = ("The set's record", "no record of its baselines")
RECORD_WORD = re.compile(r"\brecords?\b|\brecord's\b|\brecords'", re.IGNORECASE)


class VisibleText(HTMLParser):
    """The text a reader sees, one text node per line: the page's and its charts' (SVG text and
    titles), without the stylesheet."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.skip = 0
        self.lines: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.skip += tag in ("style", "script")

    def handle_endtag(self, tag: str) -> None:
        self.skip -= tag in ("style", "script")

    def handle_data(self, data: str) -> None:
        if not self.skip and data.strip():
            self.lines.append(" ".join(data.split()))


def visible(path: Path) -> list[str]:
    return VisibleText(path.read_text(encoding="utf-8")).lines


def record_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if RECORD_WORD.search(line)]


def says_record(lines: list[str]) -> list[str]:
    """The lines that call something a record, the allowed phrases taken out first."""
    out = []
    for line in lines:
        for phrase in ALLOWED:
            line = line.replace(phrase, "")
        if RECORD_WORD.search(line):
            out.append(line)
    return out


@pytest.fixture(scope="module")
def ehr(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The encounters demo, small: about 5,000 rows of 2,000 patients (``ehr.toml`` counts persons,
    ``ehr-rows.toml`` the same table a row as a person)."""
    from deid_sql.starter.demo import build_ehr

    folder = tmp_path_factory.mktemp("ehr")
    build_ehr(folder, seed=3, patients=2000, people=200_000)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DEID_SQL_DEMO_KEY", "96377d37a919bd2b5b2c7b478e4c24305dd3e033c2e4fe9b3c6480d39536c671")
        yield folder


def run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def verdict_line(output: str) -> str:
    return next(line for line in output.splitlines() if line.startswith("  verdict: "))


def test_a_persons_report_says_persons_and_the_rows_of_the_suppressed(ehr: Path) -> None:
    page, release = ehr / "persons.html", ehr / "persons.parquet"
    out = run("report", str(ehr / "ehr.toml"), "--policy", POLICY, "--suppress-below", "3", "--out", str(page))
    run("materialize", str(ehr / "ehr.toml"), "--policy", POLICY, "--suppress-below", "3", "--out", str(release))
    rows = pq.read_table(release).to_pylist()
    blanked = [r for r in rows if r["deid_suppressed"]]
    # a suppressed person's rows carry no pseudonym: the gate counts them (the sidecar), the rows cannot
    assert {r["patient_id"] for r in blanked} == {None}
    suppressed = json.loads(release.with_name(release.name + ".release.json").read_text(encoding="utf-8"))[
        "figures"]["suppressed"]
    persons = len({r["patient_id"] for r in rows if not r["deid_suppressed"]}) + suppressed
    assert len(rows) > persons and len(blanked) > suppressed > 0  # several rows per person, some suppressed
    report = json.loads(page.with_suffix(".json").read_text(encoding="utf-8"))
    figures = report["risk"]["figures"]
    assert (figures["records"], figures["suppressed"]) == (persons, suppressed)  # the keys stay: a format
    assert report["unit"] == PERSONS.to_dict()
    assert report["policy"]["suppression"]["suppressed_rows"] == len(blanked)
    assert report["data"]["source"]["rows"] == len(rows)
    assert (report["data"]["source"]["persons"], report["data"]["source"]["person_key"]) == (persons, "patient_id")

    line = verdict_line(out)
    assert f"among {persons:,} persons (risk model: " in line and "no person's risk above 1/" in line
    assert f"every released group holds at least {figures['k']:,} persons" in line
    assert f"; {suppressed:,} persons suppressed ({len(blanked):,} rows);" in line
    assert "record" not in line

    lines = visible(page)
    assert says_record(lines) == []
    text = "\n".join(lines)
    for words in ("k (persons in the smallest group)", "sample-unique persons", "suppressed persons",
                  "maximum risk per person", "Persons by their risk", "persons (log scale)",
                  "group size (persons in the sample; population (census people))",
                  "each person is re-identified with probability 1/g", "Each QI before and after (share of persons)",
                  f"{suppressed:,} persons suppressed", f"{len(blanked):,} rows",
                  "source (the rows released)", "population (who the persons could be)"):
        assert words in text, words
    for rule in report["policy"]["rules"]:  # the rules' counts are persons, and add up to the unsuppressed
        assert sum(label["records"] for label in rule["labels"]) == persons - suppressed


def test_a_persons_report_with_cautions_says_persons(ehr: Path) -> None:
    page = ehr / "cautions.html"
    out = run("report", str(ehr / "ehr.toml"), "--policy", "age:every=10", "--accept-risk", "a privacy review", "--out",
              str(page))
    report = json.loads(page.with_suffix(".json").read_text(encoding="utf-8"))
    figures, cautions = report["risk"]["figures"], {c["kind"]: c["text"] for c in report["summary"]["cautions"]}
    uniques, at_risk = figures["sample_uniques"], report["risk"]["at_risk"]["records"]
    assert figures["k"] == 1 and uniques > 1 and at_risk > 1
    line = verdict_line(out)
    assert f"{uniques:,} persons are unique in the release (k = 1)" in line and "record" not in line
    assert cautions["k1"].startswith("k = 1: the smallest released group holds a single person,")
    assert cautions["sample_uniques"].startswith(f"{uniques:,} persons are unique in the release")
    assert cautions["high_risk"].startswith(f"{at_risk:,} persons have a risk of 0.5 or more")
    assert says_record(visible(page)) == []


def test_without_a_census_the_model_speaks_of_persons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sample as its own population: the population sentence, the model and its assumptions."""
    monkeypatch.setenv("DEID_PERSONS_KEY", KEY)
    rows = [{"patient_id": f"P{p}", "age": 20 + p % 7, "sex": "FM"[p % 2], "seen": v, "dx": "x"}
            for p in range(60) for v in range(1 + p % 3)]
    spec = releasable(write(tmp_path, rows, visits=False))
    page = tmp_path / "sample.html"
    run("report", str(spec), "--policy", "age:every=5|sex:top", "--out", str(page))
    lines = visible(page)
    assert says_record(lines) == []
    text = "\n".join(lines)
    assert "sex: not released in detail; every row shows 'F|M'" in text  # a line of the release is a row
    assert "none: the sample is its own population (g = persons in the released group)" in text
    assert "sample-based risk per person (1/m)^γ" in text
    assert "a released group of m persons stands for m people" in text


def test_a_plain_report_says_records_word_for_word_as_before(ehr: Path) -> None:
    """Without [person] the pages' lines that say record are main's, word for word (golden)."""
    golden = GOLDEN.read_text(encoding="utf-8").split("\n## ")[1:]
    cases = [("--policy", POLICY, "--suppress-below", "3"), ("--policy", "age:every=10", "--accept-risk", "reviewed")]
    # a recipient of its own: the folder's ledger may hold the other tests' releases to "default"
    spec = ehr / "ehr-rows-golden.toml"
    spec.write_text((ehr / "ehr-rows.toml").read_text(encoding="utf-8").replace(
        "[release]\n", '[release]\nrecipient = "golden"\n', 1), encoding="utf-8")
    for n, (case, expected) in enumerate(zip(cases, golden, strict=True)):
        page = ehr / f"plain{n}.html"
        out = run("report", str(spec), *case, "--out", str(page))
        lines, want = record_lines(visible(page)), expected.splitlines()[1:]
        assert lines == want, case
        assert all(sentence in verdict_line(out) for sentence in want[:3])  # the headline's first sentences


def test_the_gate_names_the_unit_it_counts() -> None:
    """The original-data refusal says what the release tells apart: records, or persons."""
    plain = Verdict((), original_data=True, declared=True)
    persons = Verdict((), original_data=True, declared=True, unit=PERSONS)
    assert plain.failures[0].startswith("the release tells apart every record the source tells apart (")
    assert persons.failures[0].startswith("the release tells apart every person the source tells apart (")
    assert plain.to_dict().keys() == persons.to_dict().keys()  # the sidecar's gate entry keeps its keys


def test_the_original_data_refused_in_persons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEID_PERSONS_KEY", KEY)
    rows = [{"patient_id": f"P{p}", "age": 20 + p % 7, "sex": "FM"[p % 2], "seen": v, "dx": "x"}
            for p in range(30) for v in range(2)]
    spec = releasable(write(tmp_path, rows, visits=False))
    out = tmp_path / "r.parquet"
    result = CliRunner().invoke(cli, ["materialize", str(spec), "--policy", "age:every=1", "--out", str(out)])
    assert result.exit_code == 2 and not out.exists()
    assert "tells apart every person the source tells apart" in result.output


def test_the_unit_words() -> None:
    assert (Unit.of(None), Unit.of("patient_id")) == (RECORDS, PERSONS)
    assert (RECORDS.count(1), PERSONS.count(20_000), PERSONS.whose, PERSONS.Many) == (
        "1 record", "20,000 persons", "person's", "Persons")
    assert Unit.from_dict(None) == RECORDS and Unit.from_dict(PERSONS.to_dict()) == PERSONS


def test_the_page_takes_its_words_from_the_dicts_unit(tmp_path: Path) -> None:
    """The page follows the dict's unit (no evaluation); a dict written before it had one reads as
    records, word for word; the charts' data attributes keep their names whatever the words."""
    plain = sample_report()
    older = {k: v for k, v in plain.items() if k != "unit"}
    assert render_html(older) == render_html(plain)
    persons = sample_report() | {"unit": PERSONS.to_dict()}
    persons["policy"]["suppression"] |= {"suppressed_records": 7, "suppressed_rows": 19, "suppressed_groups": 3,
                                         "share": 7 / 20_000, "rule": "groups of fewer than 5 persons"}
    page = tmp_path / "p.html"
    page.write_text(render_html(persons), encoding="utf-8")
    text = "\n".join(visible(page))
    assert "7 persons suppressed (" in text and "19 rows" in text and "the rules' person counts" in text
    assert 'data-records="' in page.read_text(encoding="utf-8")  # the histogram's counts, as before
    # the page's own words (the sample's sentences are the dict's, written for records)
    for words in ("persons released", "k (persons in the smallest group)", "sample-unique persons",
                  "maximum risk per person", "Persons by their risk", "persons (log scale)",
                  "Each QI before and after (share of persons)", "source (the rows released)",
                  "no person is unique in the release, no person's risk is 0.5 or more"):
        assert words in text, words
    assert "k (records in the smallest group)" not in text and "Records by record risk" not in text
