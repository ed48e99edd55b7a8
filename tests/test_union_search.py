"""anonymize searches on what the recipient holds (issue 41, METHODS decision 16): the earlier labels
are a fixed value of each person, k is judged on every (group, earlier label), and the optimum is the
best policy whose union passes — equal to a pure-Python reading over the whole lattice, and released
by the gate where the search that ignores the earlier releases is refused."""

from __future__ import annotations

import json
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow.csv as pacsv
import pytest
from click.testing import Result
from hypothesis import given, settings
from hypothesis import strategies as st

from deid_sql import Problem
from deid_sql.errors import ReleaseRefused
from deid_sql.fulldomain import KAnonymity, Loss, TransformationSpace, TransformEvaluator, UnionKAnonymity
from deid_sql.jobs.anonymize import anonymize, privacy_models, release_plan, with_earlier
from deid_sql.jobs.earlier import EARLIER, earlier_releases
from deid_sql.loading.sensitive import SensitiveCells, sensitive_cells
from deid_sql.release.output import materialize
from tests.engines import ENGINES, Engine, engine_fixture, engine_params

from .baselines.fulldomain import exhaustive
from .test_fulldomain import small_reference, small_spec
from .test_ledger import A, key, write  # noqa: F401 - key: the fixture setting the key

K = 10


def _as_earlier(cells: SensitiveCells) -> SensitiveCells:
    return SensitiveCells(EARLIER, cells.positions, cells.codes, cells.counts, cells.values, cells.per_person)


def _union_suppressed(groups: list[tuple[str, ...]], held: list[str], k: int) -> int:
    """Records of the groups a pure-Python reading suppresses: fewer than k, or any part of the group
    sharing one earlier label smaller than k."""
    sizes = Counter(groups)
    parts = Counter(zip(groups, held))
    failing = {g for g, n in sizes.items() if n < k} | {g for (g, _), n in parts.items() if n < k}
    return sum(n for g, n in sizes.items() if g in failing)


@settings(max_examples=6, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([2, 3, 4]), st.sampled_from([0.0, 0.04, 1.0]))
def test_every_transformation_suppresses_what_the_reading_fails(seed: int, k: int, limit: float) -> None:
    """The earlier label of each record is its ``dx`` (any fixed value per person will do): over the
    whole lattice the records suppressed and the verdicts equal the reading's, and the search's
    optimum equals exhaustive enumeration."""
    folder = Path(tempfile.mkdtemp(prefix="union-"))
    path = small_spec(folder, rows=160, seed=seed)
    ref = small_reference(path)
    held = [str(v) for v in ref.sensitive or []]
    with Problem.from_spec(path) as p:
        cells = _as_earlier(sensitive_cells(p, "dx"))
        space = TransformationSpace(p)
        models = [KAnonymity(k), UnionKAnonymity(k, cells, "study", ("r1",), 2)]
        ev = TransformEvaluator(p, models, Loss(), limit, space=space)
        for x in space:
            expected = _union_suppressed(list(ref.generalized(x)), held, k)
            out = ev.apply(x)
            assert out.accepted == (expected <= ev.max_suppressed), x
            if out.accepted:
                assert out.suppressed == expected, x
        best = anonymize(p, models, limit).result.optimum
        truth = exhaustive(space, TransformEvaluator(p, models, Loss(), limit, space=space))
        assert (best is None) == (truth is None)
        if best is not None and truth is not None:
            assert best.quality == pytest.approx(truth.quality)


def test_predictive_only_without_suppression() -> None:
    folder = Path(tempfile.mkdtemp(prefix="union-"))
    with Problem.from_spec(small_spec(folder, rows=120, seed=3)) as p:
        cells = _as_earlier(sensitive_cells(p, "dx"))
        strict = TransformEvaluator(p, [KAnonymity(2), UnionKAnonymity(2, cells)], Loss(), 0.0)
        loose = TransformEvaluator(p, [KAnonymity(2), UnionKAnonymity(2, cells)], Loss(), 0.05)
        assert strict.predictive == {"up", "down"} and loose.predictive == frozenset()


def test_anonymize_out_keeps_the_union_where_the_search_alone_is_refused(
        tmp_path: Path, run: Callable[..., Result]) -> None:
    """The ledger's case: A (age in bands, ZIP hidden) to the recipient; alone, the best policy hides
    age and keeps ZIP, which with A singles everyone out.  anonymize searches on the union, picks
    the best policy whose union keeps k, and the gate releases it."""
    spec = write(tmp_path)
    run("materialize", spec, "--policy", A, "--out", "a.parquet")
    with Problem.from_spec(spec) as p:
        alone = anonymize(p, privacy_models(K))
        assert alone.levels == (1, 0)  # age hidden, ZIP kept
        with pytest.raises(ReleaseRefused, match="with the 1 earlier release to default"):
            materialize(p, release_plan(p, alone), tmp_path / "alone.parquet")
        earlier = earlier_releases(p)
        assert earlier is not None and earlier.held == 100 and len(earlier.releases) == 1
    assert not (tmp_path / "alone.parquet").exists()
    done = run("anonymize", spec, "--out", tmp_path / "b.parquet")
    assert "with the 1 earlier release to 'default' (100 of these persons held)" in done.stdout
    assert "union.k 10 >= 10" in done.stdout
    record = json.loads((tmp_path / "b.parquet.release.json").read_text(encoding="utf-8"))
    assert record["policy"]["levels"] == "age:0|zip:1" and record["figures"]["union"]["k"] >= K
    assert record["suppression"]["anonymize"]["models"]["earlier"]["recipient"] == "default"


def test_a_report_of_the_release_runs_the_same_search_again(tmp_path: Path, run: Callable[..., Result]) -> None:
    """With suppression the sidecar records the search, earlier releases included (the ledger entry
    it read before), so a report of the release finds the same optimum after the release's own entry."""
    spec = write(tmp_path)
    run("materialize", spec, "--policy", A, "--out", "a.parquet")
    run("anonymize", spec, "--max-suppressed-share", "0.1", "--out", tmp_path / "b.parquet")
    record = json.loads((tmp_path / "b.parquet.release.json").read_text(encoding="utf-8"))
    union = record["suppression"]["anonymize"]["models"]["earlier"]
    assert union["recipient"] == "default" and union["before"] == 2 and len(union["releases"]) == 1
    run("report", spec, "--from-release", tmp_path / "b.parquet.release.json", "--out", tmp_path / "b.html")
    assert (tmp_path / "b.html").exists()


def test_no_earlier_release_no_union_model(tmp_path: Path) -> None:
    spec = write(tmp_path)
    with Problem.from_spec(spec) as p:
        assert earlier_releases(p) is None
        models = privacy_models(K)
        assert with_earlier(models, None) == models


def test_the_earlier_labels_count_persons_per_cell(tmp_path: Path, run: Callable[..., Result]) -> None:
    """Each person's cell and earlier label (A's age band; ZIP hidden), counted as the cells place them."""
    spec = write(tmp_path)
    run("materialize", spec, "--policy", A, "--out", "a.parquet")
    with Problem.from_spec(spec) as p:
        earlier = earlier_releases(p)
        assert earlier is not None
        cells = earlier.cells
        per_label: dict[str, int] = defaultdict(int)
        for code, n in zip(cells.codes, cells.counts):
            per_label[cells.values[code]] += int(n)
        assert sorted(per_label.values()) == [10] * 10  # ten age bands of ten persons
        assert int(cells.counts.sum()) == 100 and np.all(cells.counts >= 1)


@pytest.fixture(scope="module", params=engine_params(*ENGINES))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


def test_every_engine_searches_on_the_same_earlier_labels(engine: Engine, tmp_path: Path,
                                                          run: Callable[..., Result]) -> None:
    """The persons' pseudonyms computed where the data is (DuckDB, PostgreSQL, Spark) meet the
    ledger's: the same earlier labels, and anonymize keeps the union on every engine."""
    local = write(tmp_path)
    name = f"union_src_{engine.name}"
    source = engine.load(name, pacsv.read_csv(tmp_path / "src.csv"))
    spec = tmp_path / "engine.toml"
    spec.write_text(local.read_text(encoding="utf-8").replace('[source]\npath = "src.csv"\n',
                                                             engine.header() + f"\n[source]\n{source}\n"),
                    encoding="utf-8")
    run("materialize", spec, "--policy", A, "--out", tmp_path / "a.parquet")
    with Problem.from_spec(spec) as p:
        earlier = earlier_releases(p)
    assert earlier is not None and earlier.held == 100
    per_label: dict[str, int] = defaultdict(int)
    for code, n in zip(earlier.cells.codes, earlier.cells.counts):
        per_label[earlier.cells.values[code]] += int(n)
    assert sorted(per_label.values()) == [10] * 10
    run("anonymize", spec, "--out", tmp_path / "b.parquet")
    record = json.loads((tmp_path / "b.parquet.release.json").read_text(encoding="utf-8"))
    assert record["policy"]["levels"] == "age:0|zip:1" and record["figures"]["union"]["k"] >= K


def test_a_search_refuses_a_ledger_linked_by_another_column_than_the_person(
        tmp_path: Path, run: Callable[..., Result]) -> None:
    """With [person], the search counts what a recipient holds per person; a release linked by another
    pseudonymized column (the person key dropped) holds no per-person labels to count: one line."""
    spec = write(tmp_path, roles='pseudonymize = ["visit_id"]\ndrop = ["patient_id"]\nsecret_env = "DEID_LEDGER_KEY"')
    rows = (tmp_path / "src.csv").read_text(encoding="utf-8").splitlines()
    (tmp_path / "src.csv").write_text("\n".join([rows[0] + ",visit_id"] + [f"{r},V{i}" for i, r in enumerate(rows[1:])])
                                      + "\n", encoding="utf-8")
    run("materialize", spec, "--policy", A, "--out", "a.parquet")
    spec.write_text(spec.read_text(encoding="utf-8") + '\n[person]\ncolumn = "patient_id"\n', encoding="utf-8")
    refused = run("anonymize", spec, "--min-k", K, "--out", "b.parquet", expect=2)
    assert "links persons by 'visit_id', not by the [person] key 'patient_id'" in refused.stderr
    assert "Traceback" not in refused.stderr and not (tmp_path / "b.parquet").exists()
