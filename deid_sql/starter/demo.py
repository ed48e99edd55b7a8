"""The embedded default problem: a synthetic state census and a patient cohort.

``build_demo(folder)`` writes a population Parquet file, a cohort Parquet file
and a spec declaring age, sex, race and ZIP5 as QIs, so ``deid-sql demo`` runs
on a fresh install with no arguments and no data of the user's.  Beside it, the
spec the demo searches and releases with: the same problem with publishable cut
points only (``publishable_spec``), and how the demo picks the policy it
recommends among everything it plots (``choose_policy``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from ..domains.recoding import Recoding
from ..evaluate.metrics import Metrics
from ..policies.lattice import Lattice, Policy
from ..release.safe_harbor import AGE_LIMIT
from ..search.frontier import Point, dominates

_SPEC = """\
# A deid-sql problem: patients with age, sex, race and ZIP5 against the census of their state.
name = "{name}"
gamma = 1.0

[source]
path = "{source}"

[population]
path = "{population}"
count = "count"

[[qi]]
name = "age"
kind = "integer"
min = 0
max = 120
role = "age"

[[qi]]
name = "sex"
kind = "category"
values = ["Female", "Male"]

[[qi]]
name = "race"
kind = "category"
values = ["White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"]

[[qi]]
name = "zip"
kind = "zip"
role = "zip"
"""


def census_spec(source: str, population: str = "population.parquet", name: str = "demo") -> str:
    """Spec text for a source with the synthetic census's QIs (age, sex, race, zip):
    the demo's problem, and the benchmarks' Adult+ZIP and large-cohort problems."""
    return _SPEC.format(name=name, source=source, population=population)


# the roles of the cohort's other columns (``fixtures.synthetic_cohort``): the record number and the
# admission date are identifiers (a full date is one under Safe Harbor), the blood pressure is released
COHORT_COLUMNS = """
[columns]
drop = ["patient_id", "admitted"]
sensitive = ["diagnosis"]
keep = ["systolic_bp"]
"""
# what a release of the demo must meet (the gate judges every release and the report shows the verdict):
# no riskier than HIPAA Safe Harbor, the bar the demo's search recommends against
DEMO_RELEASE = """
[release]
no_riskier_than = "safe-harbor"
"""
DEMO_SPEC = census_spec("cohort.parquet") + COHORT_COLUMNS + DEMO_RELEASE

# The spec the demo searches and releases with: demo.toml's problem with cut points a custodian can
# publish.  Ages start a band only at a multiple of 5 up to Safe Harbor's top code (ages 90 and above
# are one group, HIPAA §164.514(b)(2)(i)(C)); ZIP codes are grouped only where their first three digits
# change (ZIP3, or runs of ZIP3s).  Sex and race stay free: every group of theirs is a list of named
# categories a reader can check.  demo.toml itself keeps every cut allowed: the docs' examples cut ages
# anywhere (``age:cuts=18,65``).
PUBLISHABLE_FILE = "demo-publishable.toml"
PUBLISHABLE_AGE_CUTS = tuple(range(5, AGE_LIMIT + 1, 5))
PUBLISHABLE_ZIP_DIGITS = (3,)
# what the demo's release must meet: no riskier than Safe Harbor, and at most one patient of the
# cohort expected to be re-identified; the demo recommends the policy losing least among those meeting it
PUBLISHABLE_MAX_REIDENTIFICATIONS = 1
PUBLISHABLE_RELEASE = f"""
[release]
no_riskier_than = "safe-harbor"
max_expected_reidentifications = {PUBLISHABLE_MAX_REIDENTIFICATIONS}
"""


def publishable_spec() -> str:
    """The demo's problem (``DEMO_SPEC``'s data, QIs and column roles) with publishable cut points
    and the demo's release criteria (``PUBLISHABLE_RELEASE``)."""
    cuts = ", ".join(str(a) for a in PUBLISHABLE_AGE_CUTS)
    digits = ", ".join(str(d) for d in PUBLISHABLE_ZIP_DIGITS)
    text = census_spec("cohort.parquet", name="demo-publishable")
    for role, rule in (("age", f"cuts = [{cuts}]"), ("zip", f"zip_digits = [{digits}]")):
        line = f'role = "{role}"\n'
        if text.count(line) != 1:
            raise AssertionError(f"the census spec must give one QI the role {role}")  # the template changed
        text = text.replace(line, line + rule + "\n")
    return text + COHORT_COLUMNS + PUBLISHABLE_RELEASE


def build_demo(folder: str | Path, seed: int = 0, records: int = 20_000,
               people: int = 2_000_000) -> Path:
    """Write the demo data and its specs into ``folder`` (``demo.toml``, ``demo-publishable.toml``,
    ``demo-no-census.toml``); return ``demo.toml``'s path."""
    from ..fixtures import synthetic_cohort, synthetic_population

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    population = synthetic_population(seed, total=people)
    pq.write_table(population, out / "population.parquet")
    pq.write_table(synthetic_cohort(population, records, seed), out / "cohort.parquet")
    spec = out / "demo.toml"
    spec.write_text(DEMO_SPEC, encoding="utf-8")
    (out / PUBLISHABLE_FILE).write_text(publishable_spec(), encoding="utf-8")
    (out / "demo-no-census.toml").write_text(no_census_spec(people), encoding="utf-8")
    return spec


# the encounters demo (``deid-sql demo --ehr``): one row per visit, the person named by patient_id, and
# the age at the first visit standing for the patient (a patient's age grows across visits)
EHR_PERSON = """
[person]
column = "patient_id"
order = "admitted"
"""
EHR_COLUMNS = """
[columns]
drop = ["admitted", "discharged", "encounter_id"]
sensitive = ["diagnosis"]
pseudonymize = ["patient_id"]   # a release counted in persons carries the key, pseudonymized
secret_env = "DEID_SQL_DEMO_KEY"
"""
EHR_POLICIES = ("age:cuts=18,30,45,65,90|zip:digits=3", "age:every=10")


# the linked-tables demo: the patients as the person source, their encounters and diagnoses released
# with them as one set, the key pseudonymized alike in every table and every date shifted per patient
EHR_SET = """
[person]
column = "patient_id"
shift_days = 30                   # each patient's dates move by one secret offset in [-30, +30] days

[columns]
pseudonymize = ["patient_id"]
secret_env = "DEID_SQL_DEMO_KEY"  # the key of the pseudonyms and of the date offsets

[[table]]
name = "encounters"
path = "encounters.parquet"
pseudonymize = ["encounter_id"]   # the same HMAC as in diagnoses: the tables still join
shift = ["admitted", "discharged"]
sensitive = ["diagnosis"]
drop = ["age", "sex", "race", "zip"]  # the QIs live in the person source, generalized there

[[table]]
name = "diagnoses"
path = "diagnoses.parquet"
pseudonymize = ["encounter_id"]
shift = ["noted"]
sensitive = ["code"]
"""


def ehr_set_spec() -> str:
    """The linked-tables spec over ``patients.parquet``, ``encounters.parquet``, ``diagnoses.parquet``."""
    base = census_spec("patients.parquet", name="ehr-set")
    base = base.replace('path = "patients.parquet"\n', 'path = "patients.parquet"\nname = "patients"\n', 1)
    return base + DEMO_RELEASE + EHR_SET


def ehr_specs() -> tuple[str, str]:
    """(the spec counting persons, the same spec counting rows) over ``encounters.parquet``."""
    base = census_spec("encounters.parquet", name="ehr") + EHR_COLUMNS + DEMO_RELEASE
    persons = base.replace('role = "age"\n', 'role = "age"\nper_person = "first"\n', 1) + EHR_PERSON
    return persons, base


def build_ehr(folder: str | Path, seed: int = 0, patients: int = 20_000,
              people: int = 2_000_000) -> tuple[Path, Path]:
    """Write the encounters demo into ``folder``: the census, ``encounters.parquet`` (several rows
    per patient), ``ehr.toml`` (persons) and ``ehr-rows.toml`` (the same, a row as a person); and
    the linked tables' demo beside them: ``patients.parquet``, ``diagnoses.parquet`` and
    ``ehr-set.toml`` (the three released as one set)."""
    from ..fixtures import synthetic_population
    from ..fixtures.encounters import patients_of, synthetic_diagnoses, synthetic_encounters

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    population = synthetic_population(seed, total=people)
    pq.write_table(population, out / "population.parquet")
    encounters = synthetic_encounters(population, patients, seed)
    pq.write_table(encounters, out / "encounters.parquet")
    pq.write_table(patients_of(encounters), out / "patients.parquet")
    pq.write_table(synthetic_diagnoses(encounters, seed), out / "diagnoses.parquet")
    persons, rows = ehr_specs()
    (out / "ehr.toml").write_text(persons, encoding="utf-8")
    (out / "ehr-rows.toml").write_text(rows, encoding="utf-8")
    (out / "ehr-set.toml").write_text(ehr_set_spec(), encoding="utf-8")
    return out / "ehr.toml", out / "ehr-rows.toml"


def no_census_spec(people: int) -> str:
    """The demo's problem as if no census existed: only the population's size is known, so risk is
    estimated from the cohort's class sizes (Dankar's rule; docs/no-census.md)."""
    census = census_spec("cohort.parquet").replace('[population]\npath = "population.parquet"\ncount = "count"\n', "")
    return f'population = {{ size = {people} }}\nrisk = "dankar"\n' + census + COHORT_COLUMNS


ADULT_COLUMNS_ROLES = """
[columns]
sensitive = ["salary-class"]
drop = ["marital-status", "education", "native-country", "workclass", "occupation"]
"""


# no criteria, no release: the full-domain walk-through releases 5-anonymous optima
ADULT_HIERARCHIES_RELEASE = """
# what a release must meet (the gate judges every release): at least 5 records in every released group
[release]
min_k = 5
"""


def build_adult(folder: str | Path, adult_dir: str | Path, seed: int = 0) -> tuple[Path, Path]:
    """Write the Adult problems of the docs and benchmarks into ``folder``; return their two specs.

    ``adult.toml``: Adult with ZIP codes drawn from the synthetic state census (its ``adult.parquet``
    and ``population.parquet`` beside it), the age, sex, race and ZIP QIs the papers' searches use.
    ``adult-hierarchies.toml``: every Adult attribute a QI with ARX's hierarchies, sample-based, read
    from ``adult_dir`` in place (the data is never copied).  ``adult_dir`` must hold ARX's
    ``adult.csv`` and ``adult_hierarchy_*.csv``.
    """
    from ..errors import SpecError
    from ..fixtures import adult_hierarchy_spec, adult_with_zip, synthetic_population
    from ..fixtures.adult import ADULT_COLUMNS

    source = Path(adult_dir).resolve()
    wanted = ["adult.csv"] + [f"adult_hierarchy_{name}.csv" for name in ADULT_COLUMNS]
    absent = [name for name in wanted if not (source / name).is_file()]
    if absent:
        raise SpecError(f"--adult {adult_dir}: {', '.join(absent[:3])}{' …' if len(absent) > 3 else ''} not found; "
                        "give the folder holding ARX's Adult files (adult.csv and adult_hierarchy_*.csv)")
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    population = synthetic_population(seed)
    pq.write_table(population, out / "population.parquet")
    pq.write_table(adult_with_zip(source / "adult.csv", seed, population), out / "adult.parquet")
    census = out / "adult.toml"
    census.write_text(census_spec("adult.parquet", name="adult") + ADULT_COLUMNS_ROLES, encoding="utf-8")
    hierarchies = out / "adult-hierarchies.toml"
    hierarchies.write_text(adult_hierarchy_spec(source, [c for c in ADULT_COLUMNS if c != "salary-class"])
                           + ADULT_HIERARCHIES_RELEASE, encoding="utf-8")
    return census, hierarchies


def showcase_policies(lattice: Lattice) -> list[tuple[str, Policy | Recoding]]:
    """A few policies from the original data to full generalization, for the demo's first table.

    The original data is a recoding (on the publishable lattice no policy keeps every age); the
    others are policies the publishable cut points allow, so they exist constrained or not."""
    bottom = lattice.bottom()  # the finest allowed policy: every QI kept on an unconstrained lattice

    def with_qis(base: Policy, **parts: str) -> Policy:
        """``base`` with some QIs replaced by policy text a user could type (``zip:digits=3``)."""
        bits = base.array.astype(np.uint8).copy()
        for name, value in parts.items():
            i = lattice.index(name)
            lo, hi = lattice.offsets[i], lattice.offsets[i + 1]
            bits[lo:hi] = lattice.parse(f"{name}:{value}").qi_bits(i)
        return lattice.policy(bits)

    five = "cuts=" + ",".join(str(a) for a in PUBLISHABLE_AGE_CUTS)
    ten = "cuts=" + ",".join(str(a) for a in range(10, AGE_LIMIT + 1, 10))
    z3 = "digits=3"  # a new group at each change of the first three digits
    return [
        ("original data", lattice.original()),
        (f"5-year ages to {AGE_LIMIT}+, ZIP3", with_qis(bottom, age=five, zip=z3)),
        ("10-year ages, ZIP3", with_qis(bottom, age=ten, zip=z3)),
        ("10-year ages, ZIP3, race merged", with_qis(bottom, age=ten, zip=z3, race="top")),
        ("10-year ages, no ZIP", with_qis(bottom, age=ten, zip="top")),
        ("everything generalized", lattice.top()),
    ]


# -- the recommendation ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Candidate:
    """A policy the demo could recommend, where it comes from, and its figures."""

    source: str  # "frontier", "5-anonymity", "Bisecting Policy Search", …
    label: str  # its policy text (a k-anonymity baseline's level names when it is a recoding)
    item: Policy | Recoding
    metrics: Metrics

    @property
    def point(self) -> Point:
        return Point(self.metrics.risk, self.metrics.loss, self.label)


def dominators(point: Point, others: Sequence[Point]) -> list[Point]:
    """The points of ``others`` that strictly dominate ``point`` (lower or equal risk and loss, one
    of them lower: seed 000 Def. 3.9)."""
    return [q for q in others if dominates(q, point)]


def choose_policy(candidates: Sequence[Candidate], plotted: Sequence[Point],
                  meets: Callable[[Metrics], bool]) -> Candidate | None:
    """The policy the demo recommends: among the candidates that meet the release criteria
    (``meets``) and that nothing dominates — no other candidate, no point ``plotted`` (the searched
    policies, the baselines, Safe Harbor) — the one losing least (then the least risky, then the
    first given).  ``None`` when no candidate qualifies.

    Least loss alone would already be undominated among the qualifying candidates; the explicit
    check also covers points that do not qualify (a baseline failing ``min_k`` but less risky)."""
    points = [c.point for c in candidates] + list(plotted)
    fit = [c for c in candidates if meets(c.metrics) and not dominators(c.point, points)]
    if not fit:
        return None
    return min(fit, key=lambda c: (c.metrics.loss, c.metrics.risk))
