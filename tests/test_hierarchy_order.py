"""``cuts = "hierarchy"`` and the order of a domain: a category domain whose declared order splits
a hierarchy group takes the hierarchy's own order (every group of every level a run), and says so
in ``validate``; an integer domain keeps its order, so a group it splits is refused in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deid_sql.domains.cuts import hierarchy_domain, hierarchy_values
from deid_sql.domains.domain import CategoryDomain, IntegerDomain, ZipDomain
from deid_sql.domains.hierarchy import Hierarchy
from deid_sql.errors import SpecError
from deid_sql.problem import Problem

ADULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult"
AGE = '\n[[qi]]\nname = "age"\nkind = "integer"\nmin = 0\nmax = 120\n'
SEX = '\n[[qi]]\nname = "sex"\nkind = "category"\nvalues = ["Female", "Male"]\n'
PLAIN_RACE = '\n[[qi]]\nname = "race"\nkind = "category"\nvalues = ["White", "Black", "Asian", "Other"]\n'
ZIP = '\n[[qi]]\nname = "zip"\nkind = "zip"\n'
RACE = ('\n[[qi]]\nname = "race"\nkind = "category"\n'
        'values = ["White", "Black", "Asian", "Other"]\nhierarchy = "race.csv"\ncuts = "hierarchy"\n')
# level 1 puts Black with Other and Asian with White: neither group is adjacent in the declared order
RACE_CSV = "White;White or Asian;*\nBlack;Black or Other;*\nAsian;White or Asian;*\nOther;Black or Other;*\n"


def hand_made(rows: dict[str, tuple[str, ...]]) -> Hierarchy:
    return Hierarchy("hand.csv", {v: (v, *up) for v, up in rows.items()}, 1 + len(next(iter(rows.values()))))


def runs(hierarchy: Hierarchy, values: list[str]) -> bool:
    """Every group of every level is one run of ``values`` (checked here without the module's code)."""
    for level in range(1, hierarchy.height):
        labels = [hierarchy.rows[v][level] for v in values]
        closed: set[str] = set()
        for i, label in enumerate(labels):
            if label in closed:
                return False
            if i + 1 < len(labels) and labels[i + 1] != label:
                closed.add(label)
    return True


# -- the order itself ----------------------------------------------------------------------
def test_a_hand_made_non_adjacent_hierarchy_is_ordered_by_its_tree():
    h = hand_made({"a": ("x", "P"), "b": ("y", "Q"), "c": ("x", "P"), "d": ("z", "P"), "e": ("y", "Q"),
                   "f": ("w", "Q")})
    values = list("abcdef")
    assert h.split_group(values) == (1, "x", ["a", "c"], ["b"])
    order = h.nested_order(values)
    # P first (a is first), then Q; inside P: x (a, c) before z (d); inside Q: y (b, e) before w (f)
    assert [values[i] for i in order] == ["a", "c", "d", "b", "e", "f"]
    assert h.split_group([values[i] for i in order]) is None


def test_an_order_that_keeps_every_group_together_is_kept():
    h = hand_made({"a": ("x", "P"), "b": ("x", "P"), "c": ("y", "Q")})
    assert h.nested_order(["c", "a", "b"]) == [0, 1, 2]
    domain = CategoryDomain(("c", "a", "b"))
    assert hierarchy_domain(domain, h, "QI 'q'") == (domain, None)


def test_a_non_nested_hierarchy_is_refused_naming_level_group_and_values():
    # b's group x sits under P, c's under Q: group x would have two parents (read() refuses it too)
    h = Hierarchy("hand.csv", {"a": ("a", "x", "P"), "b": ("b", "y", "P"), "c": ("c", "x", "Q")}, 3)
    with pytest.raises(SpecError) as info:
        h.nested_order(["a", "b", "c"])
    message = str(info.value)
    assert "not nested" in message and "level 1 group 'x'" in message and "'a', 'c'" in message
    assert "'b'" in message and "\n" not in message


def test_read_refuses_a_group_with_two_parents_naming_its_values(tmp_path: Path):
    path = tmp_path / "h.csv"
    path.write_text("a;x;P;*\nb;y;P;*\nc;x;Q;*\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        Hierarchy.read(path)
    message = str(info.value)
    assert "is not a tree: group 'x' at level 1 generalizes to both 'P' ('a') and 'Q' ('c')" in message
    assert "give each group one parent" in message and "\n" not in message


def test_a_zip_domain_is_reordered_and_stays_a_zip_domain():
    h = hand_made({"37001": ("A",), "37002": ("B",), "37003": ("A",)})
    ordered, note = hierarchy_domain(ZipDomain(("37001", "37002", "37003")), h, "QI 'zip'")
    assert isinstance(ordered, ZipDomain) and ordered.values == ("37001", "37003", "37002")
    assert not ordered.lexicographic
    assert note is not None and note.startswith("QI 'zip': values ordered as the hierarchy groups them")


def test_an_integer_domain_is_never_reordered():
    h = hand_made({str(v): ("odd" if v % 2 else "even",) for v in range(4)})
    domain = IntegerDomain(0, 3)
    assert hierarchy_domain(domain, h, "QI 'n'") == (domain, None)


@st.composite
def nested(draw: st.DrawFn) -> tuple[Hierarchy, list[str]]:
    """A random tree of 1-4 levels above the values, its values listed in a random order."""
    n = draw(st.integers(1, 40))
    values = [f"v{i}" for i in range(n)]
    height = draw(st.integers(2, 5))
    # each level's groups: a random parent for every group of the level below
    groups = list(range(n))
    paths: list[list[str]] = [[] for _ in range(n)]
    for level in range(1, height):
        k = draw(st.integers(1, max(1, len(set(groups)))))
        parent = {g: draw(st.integers(0, k - 1)) for g in sorted(set(groups))}
        groups = [parent[g] for g in groups]
        for i in range(n):
            paths[i].append(f"L{level}g{groups[i]}")
    rows = {v: (v, *paths[i]) for i, v in enumerate(values)}
    shuffled = draw(st.permutations(values))
    return Hierarchy("random.csv", rows, height), list(shuffled)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(nested())
def test_the_derived_order_makes_every_group_a_run(case: tuple[Hierarchy, list[str]]):
    hierarchy, values = case
    order = hierarchy.nested_order(values)
    ordered = [values[i] for i in order]
    assert sorted(order) == list(range(len(values)))
    assert runs(hierarchy, ordered) and hierarchy.split_group(ordered) is None
    assert hierarchy.nested_order(ordered) == list(range(len(values)))  # already an order: kept
    finest = [hierarchy.rows[v][1] for v in ordered]
    for label in set(finest):  # inside a finest group the values keep the given order
        members = [v for v, g in zip(ordered, finest) if g == label]
        assert members == [v for v in values if hierarchy.rows[v][1] == label]
    if runs(hierarchy, values):
        assert order == list(range(len(values)))


# -- through the spec ----------------------------------------------------------------------
def test_cuts_hierarchy_orders_a_category_domain_by_its_hierarchy(project, run):
    (project.dir / "race.csv").write_text(RACE_CSV, encoding="utf-8")
    spec = project.spec(qis=[AGE, SEX, RACE, ZIP])
    with Problem.from_spec(spec) as problem:
        i = problem.lattice.index("race")
        assert problem.domains[i].values == ("White", "Asian", "Black", "Other")
        # what a policy file's spec hash declares (policyfile.batch): the order the load built
        assert hierarchy_values(["White", "Black", "Asian", "Other"], problem.lattice.hierarchies["race"]) == \
            problem.domains[i].values
        assert problem.lattice.qi_allowed(i).tolist() == [False, True, False]
        level1 = problem.policy("race:level=1")  # a lattice policy now, not only a recoding
        assert level1 == problem.policy("race:bottom")
        assert problem.evaluate(level1).risk <= problem.evaluate(problem.policy("bottom")).risk
    out = run("validate", spec).stdout
    assert ("  hierarchy  QI 'race': values ordered as the hierarchy groups them, since the declared order splits "
            "level 1 group 'White or Asian' ('Black' between its values): 'White', 'Asian', 'Black', 'Other'") in out
    assert "lattice" in out and "warning" not in out


def test_a_declared_order_that_fits_is_kept_without_a_note(project, run):
    (project.dir / "race.csv").write_text(RACE_CSV, encoding="utf-8")
    race = RACE.replace('["White", "Black", "Asian", "Other"]', '["Asian", "White", "Other", "Black"]')
    spec = project.spec(qis=[AGE, SEX, race, ZIP])
    with Problem.from_spec(spec) as problem:
        assert problem.domains[problem.lattice.index("race")].values == ("Asian", "White", "Other", "Black")
        assert problem.order_notes == []
    assert "hierarchy " not in run("validate", spec).stdout


def test_an_integer_domain_whose_hierarchy_splits_a_group_is_refused_in_one_line(project, run):
    rows = "".join(f"{a};{'even' if a % 2 == 0 else 'odd'};*\n" for a in range(121))
    (project.dir / "age.csv").write_text(rows, encoding="utf-8")
    spec = project.spec(qis=[AGE + 'hierarchy = "age.csv"\ncuts = "hierarchy"\n', SEX, PLAIN_RACE, ZIP])
    with pytest.raises(SpecError) as info:
        Problem.from_spec(spec)
    assert len(info.value.problems) == 1
    result = run("validate", spec, expect=2)
    lines = result.stderr.strip().splitlines()
    assert lines == [
        "error: [[qi]] 'age': cuts = \"hierarchy\" needs every group to be a run of adjacent values, but level 1 "
        "group 'even' holds '0', '2', '4', '6', '8' and 56 more with '1', '3', '5', '7', '9' and 55 more between "
        "them; integer values keep their own order: give the hierarchy groups of adjacent values, or list the cuts"]
    assert "Traceback" not in result.output


def test_the_reordered_domain_survives_the_cells_cache(project, tmp_path, scans):
    from deid_sql.loading.cache import CellsCache

    (project.dir / "race.csv").write_text(RACE_CSV, encoding="utf-8")
    race = RACE.replace('values = ["White", "Black", "Asian", "Other"]\n', 'values_from = "source"\n')
    spec = project.spec(qis=[AGE, SEX, race, ZIP])
    cache = CellsCache(tmp_path / "cache")
    figures = []
    for _ in range(2):  # the second load reads the cached cells and values
        with Problem.from_spec(spec, cache=cache) as problem:
            domain = problem.domains[problem.lattice.index("race")]
            assert runs(problem.lattice.hierarchies["race"], list(domain.values))
            figures.append((domain.values, problem.evaluate(problem.policy("race:level=1")).risk))
    assert scans == ["source", "population"]  # the first load only
    assert figures[0] == figures[1]


# -- the Adult hierarchies -----------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(not ADULT.is_dir(), reason="the Adult data is not in ../shared/data/adult")
def test_every_adult_hierarchy_level_is_a_policy_with_cuts_hierarchy(tmp_path: Path, run):
    from deid_sql.fixtures import adult_hierarchy_spec

    names = ["age", "education", "marital-status", "native-country", "occupation", "workclass"]  # race, sex: only "*"
    text = adult_hierarchy_spec(ADULT, names)
    for name in names:
        text = text.replace(f'adult_hierarchy_{name}.csv"\n', f'adult_hierarchy_{name}.csv"\ncuts = "hierarchy"\n')
    spec = tmp_path / "adult.toml"
    spec.write_text(text, encoding="utf-8")
    with Problem.from_spec(spec) as problem:
        for name in names:
            i = problem.lattice.index(name)
            hierarchy = problem.lattice.hierarchies[name]
            domain = problem.domains[i]
            texts = [domain.text(p) for p in range(domain.size)]
            assert runs(hierarchy, texts), name
            for level in range(1, hierarchy.height):  # level 0 cuts where the rule allows none
                policy = problem.policy(f"{name}:level={level}")  # a policy: every level is a set of cuts
                groups = hierarchy.recoding(domain, level).group_of
                assert np.array_equal(policy.recoding().qis[i].group_of, groups), (name, level)
        declared = [v for v in Hierarchy.read(ADULT / "adult_hierarchy_education.csv").rows]
        education = problem.domains[problem.lattice.index("education")].values
        assert sorted(education) == sorted(declared) and list(education) != declared
        workclass = problem.domains[problem.lattice.index("workclass")].values
        assert list(workclass) == list(Hierarchy.read(ADULT / "adult_hierarchy_workclass.csv").rows)
    out = run("validate", spec).stdout
    reordered = [line.split("'")[1] for line in out.splitlines() if line.startswith("  hierarchy  QI")]
    # workclass's file lists its groups' values together already, so its order is kept
    assert reordered == ["education", "marital-status", "native-country", "occupation"]


@pytest.mark.slow
def test_a_policy_file_saved_on_a_reordered_domain_applies(project, run, tmp_path):
    import pyarrow.parquet as pq

    (project.dir / "race.csv").write_text(RACE_CSV, encoding="utf-8")
    spec = project.spec(qis=[AGE, SEX, RACE, ZIP])
    saved = tmp_path / "policy.json"
    run("policy", "save", spec, "--policy", "age:every=10|race:level=1|zip:digits=3", "--out", saved)
    out = tmp_path / "release.parquet"
    run("apply", saved, "--source", project.source_parquet, "--out", out)
    races = set(pq.read_table(out).column("race").to_pylist())
    assert races <= {"White|Asian", "Black|Other", "*"} and {"White|Asian", "Black|Other"} <= races
