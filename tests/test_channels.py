"""Channel expansion (seed 003, Garfinkel, Gopal and Thompson 2007): the model of §4–§6.2.

Risk classification (eqs. 2–4), candidate output channels (eq. 5 and the §7 rules),
the program (11)–(16) and its LP / MILP optima, the paper's running example
(Table 1, Figures 4–6), and properties on random instances: the MILP over every
candidate equals an exhaustive search over whole-subject assignments, and the
rounded-and-repaired assignment never breaks (7) or (9).

The exhaustive search is written independently of the library (exact fractions,
its own candidate enumeration, a DP over the subjects still to place); see
``exhaustive_optimum``.
"""

from __future__ import annotations

import csv
import itertools
import math
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from deid_sql.channels.assignment import Assignment, whole_subjects
from deid_sql.channels.candidates import generate, possible
from deid_sql.channels.inputs import Classification, InputChannels, RiskRule
from deid_sql.channels.job import ChannelJob, solve
from deid_sql.channels.program import Program, build, solve_lp, solve_milp
from deid_sql.errors import DeidError, SpecError

# deid_sql.fixtures is first- or third-party depending on the ruff config: pin it here.
# isort: off
from deid_sql.fixtures.channels import DH, DHM, DIABETES, HEART, NONE, TABLE1, TABLE1_CHANNELS, write_table1
# isort: on

VALUES = (NONE, DIABETES, HEART, DH, DHM)  # v^0 … v^4 in the paper's order
PAPER_U = {DIABETES: Fraction("0.25"), HEART: Fraction("0.25"), DH: Fraction("0.30"), DHM: Fraction("0.18")}
PAPER_B = Fraction("0.6")


# -- independent reference: Table 1 by hand, exact risk, exhaustive whole-subject search ----------------

def table1_counts() -> list[list[int]]:
    """m_r^{in,k} for the paper's channels 1…6 (rows) and v^0…v^4 (columns), counted from TABLE1."""
    counts = [[0] * len(VALUES) for _ in TABLE1_CHANNELS]
    for row in TABLE1:
        counts[TABLE1_CHANNELS.index(tuple(row[3:7]))][VALUES.index(row[7])] += 1
    return counts


@dataclass(frozen=True)
class Exact:
    """A channel problem in exact arithmetic: counts[r][k] with k = 0 the none value."""

    counts: Sequence[Sequence[int]]
    u: Sequence[Fraction]  # u[0] unused
    b: Fraction | None
    c: Sequence[Fraction]  # c[0] = 0

    @property
    def sizes(self) -> list[int]:
        return [sum(row) for row in self.counts]

    def p(self, r: int, k: int) -> Fraction:
        return Fraction(self.counts[r][k], self.sizes[r])

    def risky(self, r: int) -> bool:
        """Eq. 3 for some k, or eq. 4."""
        over = any(self.p(r, k) > self.u[k] for k in range(1, len(self.u)))
        heavy = self.b is not None and sum(self.c[k] * self.p(r, k) for k in range(len(self.c))) > self.b
        return over or heavy

    def safe_block(self, x: Mapping[int, int]) -> bool:
        """(7) and (9) for an output channel receiving x[r] subjects of input channel r."""
        for k in range(1, len(self.u)):
            if sum((self.p(r, k) - self.u[k]) * n for r, n in x.items()) > 0:
                return False
        if self.b is not None:
            weighted = sum((sum(self.c[j] * self.p(r, j) for j in range(len(self.c))) - self.b) * n
                           for r, n in x.items())
            if weighted > 0:
                return False
        return True

    def candidates(self) -> list[frozenset[int]]:
        """Every subset of >= 2 input channels with a safe member (eq. 5), plus d_0 (all input channels)."""
        n = len(self.counts)
        safe = {r for r in range(n) if not self.risky(r)}
        out = {frozenset(s) for size in range(2, n + 1) for s in itertools.combinations(range(n), size)
               if safe & set(s)}
        out.add(frozenset(range(n)))
        return sorted(out, key=lambda s: (len(s), sorted(s)))


def exhaustive_optimum(problem: Exact) -> int | None:
    """min Ψ over whole-subject assignments satisfying (7) and (9), or None when none exists.

    A block is one candidate output channel with a whole number of subjects from each
    member (each count 0…m_r, not all 0) that passes (7) and (9); a safe subject may also
    stay alone at cost 0.  An assignment is a set of blocks covering every subject once
    (two blocks of the same output channel merge into one with the same cost and sums).
    f(rest) = min over safe blocks that take a subject of rest's first non-empty channel
    of cost + f(rest - block), by dynamic programming over the remaining counts.
    """
    sizes = problem.sizes
    n = len(sizes)
    blocks: list[list[int]] = []
    costs: list[int] = []
    for w in problem.candidates():
        members = sorted(w)
        psi = sum(sizes[r] for r in members)
        for x in itertools.product(*[range(sizes[r] + 1) for r in members]):
            if not any(x):
                continue
            if problem.safe_block(dict(zip(members, x))):
                vec = [0] * n
                for r, v in zip(members, x):
                    vec[r] = v
                blocks.append(vec)
                costs.append(psi * sum(x))
    for r in range(n):
        if not problem.risky(r):  # a safe subject kept in its own singleton output channel
            blocks.append([1 if j == r else 0 for j in range(n)])
            costs.append(0)
    if not blocks:
        return None
    block = np.array(blocks, dtype=np.int64)
    cost = np.array(costs, dtype=np.int64)
    radix = np.array([s + 1 for s in sizes], dtype=np.int64)
    place = np.concatenate([[1], np.cumprod(radix[:-1])])
    big = np.iinfo(np.int64).max // 4
    best = np.full(int(np.prod(radix)), big, dtype=np.int64)
    best[0] = 0
    for code in range(1, best.size):  # every state's predecessors have smaller codes
        rest = (code // place) % radix
        first = int(np.flatnonzero(rest)[0])
        fits = (block <= rest).all(axis=1) & (block[:, first] > 0)
        if not fits.any():
            continue
        prev = best[code - block[fits] @ place]
        total = np.where(prev < big, prev + cost[fits], big)
        best[code] = total.min()
    result = int(best[-1])
    return None if result >= big else result


def table1_exact(c34: Fraction = Fraction(1)) -> Exact:
    c = [Fraction(0), Fraction(1), Fraction(1), c34, c34]
    return Exact(table1_counts(), [Fraction(0), *[PAPER_U[v] for v in VALUES[1:]]], PAPER_B, c)


# -- library helpers ---------------------------------------------------------------------------------------

def paper(job: ChannelJob) -> dict[int, int]:
    """The paper's input channel number (1…6) -> the library's input channel index."""
    index = job.inputs.index()
    return {i: index[key] for i, key in enumerate(TABLE1_CHANNELS, 1)}


def output_index(program: Program, members: set[int]) -> int:
    found = [w for w, m in enumerate(program.outputs.members) if set(m.tolist()) == members]
    assert len(found) == 1, (members, found)
    return found[0]


def hand_assignment(job: ChannelJob, plan: Mapping[frozenset[int], Mapping[int, int]]) -> Assignment:
    """x for ``plan``: {paper output channel: {paper input channel: subjects}}; the rest stay alone."""
    of = paper(job)
    program = job.program
    x = np.zeros(program.n_vars)
    for members, sent in plan.items():
        w = output_index(program, {of[p] for p in members})
        for v in np.flatnonzero(program.var_w == w):
            x[v] = sent.get(next(p for p, r in of.items() if r == program.var_r[v]), 0)
    return Assignment(program, x)


def used_outputs(assignment: Assignment) -> dict[frozenset[int], dict[int, int]]:
    """{library output channel members: {input channel: subjects}} for the used output channels."""
    program = assignment.program
    out: dict[frozenset[int], dict[int, int]] = {}
    for v in np.flatnonzero(assignment.x > 1e-9):
        members = frozenset(program.outputs.members[program.var_w[v]].tolist())
        out.setdefault(members, {})[int(program.var_r[v])] = round(float(assignment.x[v]))
    return out


def in_paper_terms(job: ChannelJob,
                   outputs: dict[frozenset[int], dict[int, int]]) -> dict[frozenset[int], dict[int, int]]:
    back = {r: p for p, r in paper(job).items()}
    return {frozenset(back[r] for r in m): {back[r]: n for r, n in sent.items()} for m, sent in outputs.items()}


@pytest.fixture(scope="module")
def table1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_table1(tmp_path_factory.mktemp("table1"))


@pytest.fixture(scope="module")
def table1_heavy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Table 1 with c_3 = c_4 = 1.25 (the Figure 6 variant)."""
    return write_table1(tmp_path_factory.mktemp("table1_heavy"), c34=1.25)


@pytest.fixture(scope="module")
def job(table1: Path) -> Iterator[ChannelJob]:
    with solve(table1) as j:
        yield j


@pytest.fixture(scope="module")
def heavy_job(table1_heavy: Path) -> Iterator[ChannelJob]:
    with solve(table1_heavy) as j:
        yield j


# -- §4–§5: input channels and their risk ----------------------------------------------------------------

def test_table1_input_channels_are_counted_once_per_combination(job: ChannelJob) -> None:
    of = paper(job)
    assert job.inputs.related == ("crp", "cholesterol", "bp", "glucose")
    assert set(job.inputs.keys) == set(TABLE1_CHANNELS)
    assert job.inputs.values[0] == NONE and set(job.inputs.values) == set(VALUES)
    expected = table1_counts()
    for p, r in of.items():
        for k, value in enumerate(VALUES):
            assert job.inputs.counts[r, job.inputs.values.index(value)] == expected[p - 1][k], (p, value)
    assert job.inputs.total == 15
    assert [int(job.inputs.sizes[of[p]]) for p in range(1, 7)] == [3, 2, 4, 2, 2, 2]
    np.testing.assert_allclose(job.inputs.prior[job.inputs.values.index(DH)], 3 / 15)


def test_table1_risky_input_channels_are_1_4_and_6(job: ChannelJob) -> None:
    of = paper(job)
    assert {p for p, r in of.items() if job.classes.risky[r]} == {1, 4, 6}
    exact = table1_exact()
    assert {p for p in range(1, 7) if exact.risky(p - 1)} == {1, 4, 6}  # independently, in fractions


def test_risk_rule_parameters_of_the_paper(job: ChannelJob) -> None:
    col = {v: job.inputs.values.index(v) for v in VALUES}
    assert job.rule.u[0] == np.inf and job.rule.c[0] == 0  # c_0 = 0 by definition
    for value, u in PAPER_U.items():
        assert job.rule.u[col[value]] == pytest.approx(float(u))
        assert job.rule.c[col[value]] == 1.0
    assert job.rule.b == pytest.approx(0.6)


def test_section_5_1_worked_example_for_channel_4(job: ChannelJob) -> None:
    """d_4 = (N, N, N, H) is 1-risky (P = 0.5 > 0.25), 3-risky, and risky by eq. 4 (Σ c P = 1 > 0.6)."""
    r = paper(job)[4]
    col = {v: job.inputs.values.index(v) for v in VALUES}
    assert job.inputs.conditional[r, col[DIABETES]] == pytest.approx(0.5)
    assert job.classes.risky_for[r, col[DIABETES] - 1]
    assert job.classes.risky_for[r, col[DH] - 1]
    assert not job.classes.risky_for[r, col[HEART] - 1]
    assert job.classes.weighted[r] == pytest.approx(1.0)
    assert job.classes.heavy[r]


def test_classification_is_strict_at_the_threshold() -> None:
    """Eq. 3 and eq. 4 use '>': P(v|r) = u_k or Σ c P = b is safe."""
    inputs = InputChannels(("k",), (("a",), ("b",), ("c",)), ("none", "v"),
                           np.array([[1, 1], [3, 1], [4, 0]], dtype=np.int64))
    rule = RiskRule(np.array([np.inf, 0.5]), None, np.zeros(2))
    assert rule.classify(inputs).risky.tolist() == [False, False, False]
    rule = RiskRule(np.array([np.inf, 0.25]), None, np.zeros(2))
    assert rule.classify(inputs).risky.tolist() == [True, False, False]
    rule = RiskRule(np.array([np.inf, 1.0]), 0.25, np.array([0.0, 1.0]))
    classes = rule.classify(inputs)
    assert classes.risky.tolist() == [True, False, False]
    assert classes.heavy.tolist() == [True, False, False]
    assert not classes.risky_for.any()


def test_section_5_2_worked_examples(job: ChannelJob) -> None:
    """{1, 4} fails eq. 5; {4, 5} with everyone breaks (7) for k = 1; {3, 4} with everyone is feasible,
    and would break (9) with b = 0.45."""
    of = paper(job)
    members = [set(m.tolist()) for m in job.program.outputs.members]
    assert {of[1], of[4]} not in members
    both = hand_assignment(job, {frozenset({4, 5}): {4: 2, 5: 2}})
    w = output_index(job.program, {of[4], of[5]})
    diabetes = job.inputs.values.index(DIABETES)
    assert both.sums()[w, diabetes] == pytest.approx(0.0)  # P(Diabetes | {4,5}) = 1/4 = u_1: on the bound
    three_four = hand_assignment(job, {frozenset({3, 4}): {3: 4, 4: 2}})
    assert three_four.violations() == []
    exact = table1_exact()
    assert exact.safe_block({2: 4, 3: 2})
    assert not Exact(exact.counts, exact.u, Fraction("0.45"), exact.c).safe_block({2: 4, 3: 2})


@pytest.mark.slow
def test_section_5_2_four_five_breaks_eq_7_when_u1_is_lower(tmp_path: Path) -> None:
    """The paper says {4, 5} with all subjects breaks (7) for k = 1; with u_1 = 0.25 and P = 1/4 it sits
    exactly on the bound (and Figure 5 uses it), so any u_1 below 1/4 breaks it."""
    spec = write_table1(tmp_path)
    spec.write_text(spec.read_text(encoding="utf-8").replace(f'"{DIABETES}" = 0.25', f'"{DIABETES}" = 0.24'),
                    encoding="utf-8")
    with solve(spec) as j:
        a = hand_assignment(j, {frozenset({4, 5}): {4: 2, 5: 2}})
        w = output_index(j.program, {paper(j)[4], paper(j)[5]})
        assert (w, j.inputs.values.index(DIABETES)) in a.violations()


# -- candidates (eq. 5, §7) ----------------------------------------------------------------------------------

def test_candidates_all_on_table1_are_the_53_subsets_with_a_safe_channel(job: ChannelJob) -> None:
    outputs = job.program.outputs
    assert len(outputs) == 53
    assert outputs.members[0].tolist() == list(range(6))  # d_0 first
    assert outputs.origin[0] == "all"
    got = [frozenset(m.tolist()) for m in outputs.members]
    assert len(set(got)) == len(got)
    of = paper(job)
    expected = {frozenset(of[p + 1] for p in s) for s in table1_exact().candidates()}
    assert set(got) == expected
    # the §7 rules (a risky and a safe member) allow fewer: the 4 all-safe subsets pass eq. 5 but not rule 1
    mixed = {m for m in got if any(job.classes.risky[r] for r in m)}
    assert possible(3, 3, 8) == len(mixed) == 49
    for m in got:
        assert len(m) >= 2 and not all(job.classes.risky[r] for r in m)


@given(n_risky=st.integers(0, 4), n_safe=st.integers(0, 4), max_size=st.integers(2, 5), seed=st.integers(0, 99))
@settings(max_examples=40, deadline=None)
def test_generated_candidates_follow_the_section_7_rules(n_risky: int, n_safe: int, max_size: int,
                                                         seed: int) -> None:
    """d_0 first; then distinct subsets with a risky and a safe member and at most max_size members;
    asking for possible(…) of them yields every one; the same seed gives the same candidates."""
    n = n_risky + n_safe
    assume(n >= 1)
    inputs = InputChannels(("k",), tuple((f"c{r}",) for r in range(n)), ("none", "v"),
                           np.ones((n, 2), dtype=np.int64))
    risky = np.arange(n) < n_risky
    classes = Classification(risky=risky, risky_for=risky[:, None], weighted=np.zeros(n), heavy=np.zeros(n, bool))
    limit = possible(n_risky, n_safe, max_size)
    valid = {frozenset(s) for size in range(2, min(max_size, n) + 1) for s in itertools.combinations(range(n), size)
             if any(risky[list(s)]) and not all(risky[list(s)])}
    assert limit == len(valid | {frozenset(range(n))})
    everything = generate(inputs, classes, limit, max_size, seed)
    sets = [frozenset(m.tolist()) for m in everything.members]
    assert sets[0] == frozenset(range(n)) and len(set(sets)) == len(sets)
    assert set(sets) == valid | {frozenset(range(n))}
    if n_risky and n_safe:
        count = max(1, limit // 2)
        some = generate(inputs, classes, count, max_size, seed)
        again = generate(inputs, classes, count, max_size, seed)
        assert len(some) == count
        assert [m.tolist() for m in some.members] == [m.tolist() for m in again.members]
        assert {frozenset(m.tolist()) for m in some.members[1:]} <= valid
        with pytest.raises(SpecError, match="can exist"):
            generate(inputs, classes, limit + 1, max_size, seed)


def test_listed_output_channels_are_added_and_unsafe_ones_dropped(job: ChannelJob) -> None:
    h, lhln, nnnh = TABLE1_CHANNELS[0], TABLE1_CHANNELS[1], TABLE1_CHANNELS[3]
    out = generate(job.inputs, job.classes, 1, 8, 0, listed=[[h, lhln], [h, nnnh]])
    of = paper(job)
    assert [frozenset(m.tolist()) for m in out.members] == [frozenset(range(6)), frozenset({of[1], of[2]})]
    assert out.origin == ("all", "listed")
    assert len(out.dropped) == 1 and "(H, H, H, V)" in out.dropped[0] and "(N, N, N, H)" in out.dropped[0]
    with pytest.raises(SpecError, match="not in the data"):
        generate(job.inputs, job.classes, 1, 8, 0, listed=[[h, ("Z", "Z", "Z", "Z")]])


def test_listed_output_channels_reach_the_solver(tmp_path: Path) -> None:
    """Only d_0 generated, plus Figure 5's two output channels listed in the spec: the optimum is Figure 5."""
    listed = [[TABLE1_CHANNELS[0], TABLE1_CHANNELS[1], TABLE1_CHANNELS[5]], [TABLE1_CHANNELS[3], TABLE1_CHANNELS[4]]]
    text = "outputs = [" + ", ".join("[" + ", ".join("[" + ", ".join(f'"{v}"' for v in key) + "]" for key in w) + "]"
                                     for w in listed) + "]"
    spec = write_table1(tmp_path, extra=text)
    with solve(spec, candidates=1) as j:
        assert len(j.program.outputs) == 3
        assert j.program.outputs.origin == ("all", "listed", "listed")
        assert j.whole.objective == pytest.approx(65)
        assert in_paper_terms(j, used_outputs(j.whole)) == {
            frozenset({1, 2, 6}): {1: 3, 2: 2, 6: 2}, frozenset({4, 5}): {4: 2, 5: 2}}


# -- §6.2: the program ---------------------------------------------------------------------------------------

def test_program_matches_11_to_16(job: ChannelJob) -> None:
    program, inputs = job.program, job.inputs
    assert program.n_vars == sum(m.size for m in program.outputs.members) == 177
    for w, members in enumerate(program.outputs.members):  # ψ_w = Σ_{r∈w} m_r (eq. 10)
        assert program.psi[w] == inputs.sizes[members].sum()
        assert sorted(program.var_r[program.var_w == w].tolist()) == members.tolist()
    assert program.psi[0] == 15
    p = inputs.conditional
    np.testing.assert_allclose(program.coef[:, 1:], p[program.var_r, 1:] - job.rule.u[1:])
    np.testing.assert_allclose(program.coef[:, 0], (p @ job.rule.c)[program.var_r] - 0.6)
    assert program.a_eq.shape[0] == 3  # (12), one row per risky input channel
    np.testing.assert_array_equal(program.b_eq, inputs.sizes[job.classes.risky])
    assert program.n_constraints <= len(inputs.keys) + len(inputs.values) * len(program.outputs)


def test_figure_4_costs_117_and_is_feasible(job: ChannelJob) -> None:
    fig4 = hand_assignment(job, {frozenset({1, 2, 3}): {1: 3, 2: 2, 3: 4}, frozenset({4, 5, 6}): {4: 2, 5: 2, 6: 2}})
    assert fig4.violations() == []
    assert fig4.objective == pytest.approx(117)
    assert fig4.kept.tolist() == [0] * 6
    w = output_index(job.program, {paper(job)[p] for p in (1, 2, 3)})
    assert fig4.probabilities()[w, job.inputs.values.index(DH)] == pytest.approx(2 / 9)  # "0.22" in §3.1


def test_figure_5_is_the_milp_optimum_of_65(job: ChannelJob) -> None:
    assert job.route == "MILP, proven optimal"
    assert job.whole.objective == pytest.approx(65)
    assert job.whole.violations() == []
    assert in_paper_terms(job, used_outputs(job.whole)) == {
        frozenset({1, 2, 6}): {1: 3, 2: 2, 6: 2},
        frozenset({4, 5}): {4: 2, 5: 2},
    }
    of = paper(job)
    assert job.whole.kept[of[3]] == 4 and job.whole.kept.sum() == 4
    assert job.whole.omega == pytest.approx(65 / 225)
    assert job.whole.all_channel_share == 0.0
    fig5 = hand_assignment(job, {frozenset({1, 2, 6}): {1: 3, 2: 2, 6: 2}, frozenset({4, 5}): {4: 2, 5: 2}})
    np.testing.assert_allclose(fig5.x, job.whole.x)
    probs = fig5.probabilities()
    col = {v: job.inputs.values.index(v) for v in VALUES}
    w1 = output_index(job.program, {of[1], of[2], of[6]})
    w3 = output_index(job.program, {of[4], of[5]})
    np.testing.assert_allclose([probs[w1, col[v]] for v in (DIABETES, HEART, DH, DHM)], [0, 1 / 7, 2 / 7, 1 / 7])
    np.testing.assert_allclose([probs[w3, col[v]] for v in (DIABETES, HEART, DH, DHM)], [1 / 4, 0, 1 / 4, 0])


def test_figure_5_release_plan(job: ChannelJob) -> None:
    """Three released output channels: {4, 5} and {1, 2, 6} (fewest members first), then {3} alone."""
    of = paper(job)
    plan = job.release
    assert plan.members == (tuple(sorted((of[4], of[5]))), tuple(sorted((of[1], of[2], of[6]))), (of[3],))
    assert plan.labels == ("w1", "w2", "w3")
    assert plan.totals().tolist() == [4, 7, 4]
    assert sum(plan.subjects.values()) == 15
    for (w, r), n in plan.subjects.items():
        assert r in plan.members[w] and n == job.inputs.sizes[r]


def test_milp_solved_directly_agrees(job: ChannelJob) -> None:
    exact = solve_milp(job.program, 10.0)
    assert exact is not None and exact.optimal and exact.integer
    assert exact.objective == pytest.approx(65)


def test_lp_optimum_is_187_over_3_and_splits_subjects(job: ChannelJob) -> None:
    assert job.lp.method == "lp"
    assert job.lp.objective == pytest.approx(187 / 3)
    assert not job.lp.integer
    assert not np.allclose(job.lp.x, np.round(job.lp.x), atol=1e-6)
    relaxed = Assignment(job.program, job.lp.x)
    assert relaxed.violations() == []
    assert relaxed.objective == pytest.approx(job.lp.objective)
    np.testing.assert_allclose(relaxed.kept[job.classes.risky], 0, atol=1e-7)  # (12)
    assert (relaxed.kept >= -1e-7).all()  # (13)
    assert job.lp.objective <= job.whole.objective


@pytest.mark.slow
def test_exhaustive_search_confirms_65_on_table1() -> None:
    assert exhaustive_optimum(table1_exact()) == 65


def test_figure_6_is_feasible_at_115_but_the_optimum_is_79(heavy_job: ChannelJob) -> None:
    fig6 = hand_assignment(heavy_job, {frozenset({1, 2, 3, 6}): {1: 3, 2: 2, 3: 2, 6: 2},
                                       frozenset({4, 5}): {4: 2, 5: 2}})
    assert fig6.violations() == []
    assert fig6.objective == pytest.approx(115)
    assert fig6.kept[paper(heavy_job)[3]] == 2
    w = output_index(heavy_job.program, {paper(heavy_job)[p] for p in (1, 2, 3, 6)})
    col = {v: heavy_job.inputs.values.index(v) for v in VALUES}
    np.testing.assert_allclose([fig6.probabilities()[w, col[v]] for v in (DIABETES, HEART, DH, DHM)],
                               [0, 1.5 / 9, 2 / 9, 1 / 9])  # Figure 6: 0%, 17%, 22%, 11%
    assert heavy_job.route == "MILP, proven optimal"
    assert heavy_job.whole.objective == pytest.approx(79)
    assert heavy_job.whole.violations() == []
    assert heavy_job.whole.objective < fig6.objective  # Figure 6 is feasible, not optimal
    assert heavy_job.lp.objective <= heavy_job.whole.objective


def test_figure_5_is_unsafe_under_the_higher_weights(heavy_job: ChannelJob) -> None:
    """With c_3 = c_4 = 1.25, {1, 2, 6} has Σ c P = (2.5 + 1.25 + 1) / 7 > 0.6: (9) breaks."""
    fig5 = hand_assignment(heavy_job, {frozenset({1, 2, 6}): {1: 3, 2: 2, 6: 2}, frozenset({4, 5}): {4: 2, 5: 2}})
    w = output_index(heavy_job.program, {paper(heavy_job)[p] for p in (1, 2, 6)})
    assert fig5.violations() == [(w, 0)]
    assert fig5.sums()[w, 0] == pytest.approx(7 * (4.75 / 7 - 0.6))


@pytest.mark.slow
def test_exhaustive_search_confirms_79_under_the_higher_weights() -> None:
    exact = table1_exact(Fraction("1.25"))
    assert exact.safe_block({0: 3, 1: 2, 2: 2, 5: 2})  # Figure 6's first output channel, independently
    assert exhaustive_optimum(exact) == 79


def test_rounded_lp_route_is_safe_and_whole(table1: Path) -> None:
    with solve(table1, integer="never") as j:
        assert j.route.startswith("LP rounded")
        assert j.whole.violations() == []
        np.testing.assert_array_equal(j.whole.x, np.round(j.whole.x))
        assert (j.whole.kept[j.classes.risky] == 0).all()
        assert j.whole.objective >= 65
        assert sum(j.release.subjects.values()) == 15


def test_overrides_take_precedence_over_the_spec(table1: Path) -> None:
    with solve(table1, candidates=10, seed=3) as a, solve(table1, candidates=10, seed=3) as b:
        assert len(a.program.outputs) == 10
        assert [m.tolist() for m in a.program.outputs.members] == [m.tolist() for m in b.program.outputs.members]
        assert a.settings.seed == 3 and a.settings.candidates == 10
        assert a.whole.violations() == []
        assert a.whole.objective >= 65


# -- property: the MILP over every candidate equals an exhaustive search ------------------------------------

@dataclass(frozen=True)
class Tiny:
    channels: list[list[int]]  # per input channel, each subject's value index (0 = none)
    values: int  # K
    u: dict[int, Fraction]  # given thresholds (others default to P(v^k))
    b: Fraction | None
    c: dict[int, Fraction]  # given weights (others 1 when b is set)

    def exact(self) -> Exact:
        counts = [[row.count(k) for k in range(self.values + 1)] for row in self.channels]
        present = [k for k in range(self.values + 1) if any(row[k] for row in counts)]
        counts = [[row[k] for k in present] for row in counts]
        total = sum(map(sum, counts))
        u = [Fraction(0)] + [self.u.get(k, Fraction(sum(row[i] for row in counts), total))
                             for i, k in enumerate(present) if i]
        c = [Fraction(0)] + [self.c.get(k, Fraction(1)) if self.b is not None else Fraction(0)
                             for i, k in enumerate(present) if i]
        return Exact(counts, u, self.b, c)

    def write(self, folder: Path) -> Path:
        with open(folder / "tiny.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["id", "lab_a", "lab_b", "diagnosis"])
            i = 0
            for r, row in enumerate(self.channels):
                for k in row:
                    i += 1
                    writer.writerow([f"p{i}", f"a{r // 2}", f"b{r % 2}", "none" if k == 0 else f"v{k}"])
        lines = ['[source]', 'path = "tiny.csv"', '[channels]', 'related = ["lab_a", "lab_b"]',
                 'confidential = "diagnosis"', 'none = "none"', 'identity = ["id"]', 'candidates = "all"']
        if self.b is not None:
            lines.append(f"b = {float(self.b)}")
        lines.append("[channels.thresholds]")
        lines += [f"v{k} = {float(u)}" for k, u in self.u.items()]
        if self.c:
            lines.append("[channels.weights]")
            lines += [f"v{k} = {float(c)}" for k, c in self.c.items()]
        spec = folder / "tiny.toml"
        spec.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return spec


@st.composite
def tiny_problems(draw: st.DrawFn) -> Tiny:
    """2–4 input channels of 1–4 subjects, 1–2 risky values; thresholds on a 0.05 grid at or above P(v^k)
    (or the default P(v^k)); optionally b (possibly too small to release anything) with weights."""
    n_values = draw(st.integers(1, 2))
    channels = draw(st.lists(st.lists(st.integers(0, n_values), min_size=1, max_size=4), min_size=2, max_size=4))
    flat = [k for row in channels for k in row]
    assume(0 in flat)
    present = sorted(set(flat) - {0})
    u: dict[int, Fraction] = {}
    for k in present:
        step = draw(st.none() | st.integers(0, 6))
        if step is not None:
            prior = Fraction(flat.count(k), len(flat))
            u[k] = min(Fraction(1), Fraction(math.ceil(prior * 20) + step, 20))
    b = draw(st.none() | st.sampled_from([Fraction(n, 10) for n in range(2, 11)]))
    c: dict[int, Fraction] = {}
    if b is not None:
        for k in present:
            weight = draw(st.none() | st.sampled_from([Fraction(1, 2), Fraction(3, 2), Fraction(2)]))
            if weight is not None:
                c[k] = weight
    return Tiny(channels, n_values, u, b, c)


@pytest.mark.slow
@given(tiny_problems())
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_milp_over_all_candidates_equals_exhaustive_search(tiny: Tiny) -> None:
    expected = exhaustive_optimum(tiny.exact())
    with tempfile.TemporaryDirectory() as folder:
        spec = tiny.write(Path(folder))
        if expected is None:
            with pytest.raises(DeidError, match="no release is possible"):
                solve(spec)
            return
        with solve(spec) as j:
            assert j.whole.violations() == []
            assert round(j.whole.objective) == expected, (j.route, tiny)
            assert j.whole.objective == pytest.approx(expected)
            assert j.lp.objective <= j.whole.objective + 1e-7
            assert sum(j.release.subjects.values()) == len([k for row in tiny.channels for k in row])


# -- property: rounding and repair never break (7) or (9) ------------------------------------------------------

@st.composite
def random_programs(draw: st.DrawFn) -> tuple[Program, Exact]:
    """3–10 input channels of 1–30 subjects, values none/v1/v2; u on a 0.01 grid at or above P(v^k),
    b (with weights) at or above the all-channel weighted risk so that release is possible."""
    n = draw(st.integers(3, 10))
    counts = np.array(draw(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 6), st.integers(0, 6))
                                    .filter(lambda t: sum(t) > 0), min_size=n, max_size=n)), dtype=np.int64)
    assume((counts.sum(axis=0) > 0).all())  # every value occurs (as it does in data)
    total = int(counts.sum())
    prior = [Fraction(int(counts[:, k].sum()), total) for k in range(3)]
    u = [Fraction(0)] + [min(Fraction(1), Fraction(math.ceil(prior[k] * 100) + draw(st.integers(0, 10)), 100))
                         for k in (1, 2)]
    with_b = draw(st.booleans())
    c = [Fraction(0)] + [draw(st.sampled_from([Fraction(1, 2), Fraction(1), Fraction(3, 2)])) if with_b
                         else Fraction(0) for _ in (1, 2)]
    b = None
    if with_b:
        base = sum(ck * pk for ck, pk in zip(c, prior))
        b = Fraction(math.ceil(base * 100) + draw(st.integers(0, 10)), 100)
    inputs = InputChannels(("k",), tuple((f"c{r:02d}",) for r in range(n)), ("none", "v1", "v2"), counts)
    rule = RiskRule(np.array([np.inf, float(u[1]), float(u[2])]), None if b is None else float(b),
                    np.array([float(x) for x in c]))
    classes = rule.classify(inputs)
    n_risky, n_safe = int(classes.risky.sum()), int(classes.safe.sum())
    limit = possible(n_risky, n_safe, 4) if n_risky and n_safe else 1
    count = draw(st.integers(1, max(1, min(limit, 40))))
    outputs = generate(inputs, classes, count, 4, draw(st.integers(0, 9)))
    return build(inputs, classes, rule, outputs), Exact(counts.tolist(), u, b, c)


def exactly_safe(assignment: Assignment, exact: Exact) -> bool:
    program = assignment.program
    for w in range(len(program.outputs)):
        sent = {int(program.var_r[v]): int(round(assignment.x[v])) for v in np.flatnonzero(program.var_w == w)}
        if not exact.safe_block({r: n for r, n in sent.items() if n}):
            return False
    return True


@given(random_programs())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_whole_subjects_from_the_lp_never_break_7_or_9(case: tuple[Program, Exact]) -> None:
    program, exact = case
    assert [exact.risky(r) for r in range(len(exact.counts))] == program.classes.risky.tolist()
    lp = solve_lp(program)
    whole, _ = whole_subjects(program, lp.x)
    assert whole.violations() == []
    np.testing.assert_array_equal(whole.x, np.round(whole.x))
    assert (whole.x >= 0).all()
    assert (whole.kept[program.classes.risky] == 0).all()  # (12): risky channels send everyone
    assert (whole.kept >= 0).all()  # (13)
    assert exactly_safe(whole, exact)  # (7) and (9) in exact arithmetic, independent of the library
    assert whole.objective >= lp.objective - 1e-6


@given(random_programs(), st.data())
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_whole_subjects_repair_any_start_that_keeps_12_and_13(case: tuple[Program, Exact],
                                                               data: st.DataObject) -> None:
    """The repair is documented to end safe from any rounding; start it from an arbitrary fractional x
    that keeps (12) and (13) (risky channels send everyone, safe ones at most all) but may break (7)/(9)."""
    program, exact = case
    weights = np.array(data.draw(st.lists(st.floats(0, 1, allow_nan=False), min_size=program.n_vars,
                                          max_size=program.n_vars)))
    share = np.array(data.draw(st.lists(st.floats(0, 1, allow_nan=False), min_size=len(exact.counts),
                                        max_size=len(exact.counts))))
    sizes = program.inputs.sizes
    sent = np.where(program.classes.risky, sizes, np.floor(share * sizes * 4) / 4)  # safe: a quarter grid
    x = np.zeros(program.n_vars)
    d0 = np.flatnonzero(program.var_w == 0)
    for r in range(len(sizes)):
        vs = np.flatnonzero(program.var_r == r)
        total = weights[vs].sum()
        if total > 0:
            x[vs] = weights[vs] / total * sent[r]
        else:
            x[d0[r]] = sent[r]
    whole, _ = whole_subjects(program, x)
    assert whole.violations() == []
    assert (whole.x >= 0).all()
    np.testing.assert_array_equal(whole.x, np.round(whole.x))
    assert (whole.kept[program.classes.risky] == 0).all()
    assert (whole.kept >= 0).all()
    assert exactly_safe(whole, exact)


def test_value_counter_matches_fixture() -> None:
    """TABLE1's diagnoses: 1 Diabetes, 2 Heart, 3 {Diabetes, Heart}, 1 {Diabetes, Heart, MRSA}, 8 none."""
    assert Counter(row[7] for row in TABLE1) == {NONE: 8, DIABETES: 1, HEART: 2, DH: 3, DHM: 1}
