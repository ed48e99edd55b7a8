"""HIPAA Safe Harbor as a recoding (seed 001 App. A, seed 000 §4.1.1, METHODS.md decision 4).

ZIP codes are cut to their first three digits, and every 3-digit prefix whose population
is at most 20,000 becomes ``000``; ages of 90 and above become one group ``90+``; dates
become years; every other QI is kept.  Which QI is the ZIP, the age or a date is declared
in the spec (``role``), never guessed from names.  Safe Harbor is not a lattice node (its
``000`` bucket joins non-adjacent ZIPs), so it is a ``Recoding``: evaluated and compiled
like any policy, and the threshold and reference point of the searches.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from weakref import WeakKeyDictionary

import numpy as np
from sqlglot import exp

from ..compiler.compile import col, source_key
from ..domains.domain import DateDomain, Domain, IntegerDomain
from ..domains.recoding import QIRecoding, Recoding
from ..errors import SpecError
from ..evaluate.metrics import Metrics
from ..loading.load import POPULATION_VIEW
from ..problem import Problem
from ..spec.file import Spec

PREFIX_LIMIT = 20_000
AGE_LIMIT = 90
ZIP_PREFIX = 3
# The 17 restricted 3-digit ZIP prefixes HHS lists from the 2000 census (population ≤ 20,000).
HHS_2000_PREFIXES = frozenset({"036", "059", "063", "102", "203", "556", "692", "790", "821", "823", "830",
                               "831", "878", "879", "884", "890", "893"})
REQUIRED_ROLES = ("zip", "age")


@dataclass(frozen=True)
class SafeHarbor:
    """The recoding and what went into it (for reports)."""

    recoding: Recoding
    prefix_population: dict[str, int] | None  # None: the HHS 2000 list was used (or there is no ZIP QI)
    restricted_prefixes: tuple[str, ...]  # prefixes recoded to 000 that occur in the domain
    zip_qi: str | None = None  # the QI the ZIP rule cuts; None: the spec has no ZIP QI, nothing to cut


_METRICS: WeakKeyDictionary[Problem, Metrics] = WeakKeyDictionary()


def safe_harbor_metrics(problem: Problem) -> Metrics:
    """Safe Harbor's metrics on ``problem``'s data, computed once per loaded problem: the reference
    of ``no_riskier_than = "safe-harbor"`` in every release gate of a run and the report's
    comparison row are the same evaluation."""
    if problem not in _METRICS:
        _METRICS[problem] = problem.evaluate(safe_harbor(problem).recoding)
    return _METRICS[problem]


def missing_roles(spec: Spec) -> list[str]:
    """The roles Safe Harbor needs that ``spec`` gives no QI: age, and zip when the spec has a ZIP QI
    (of kind zip, or any QI with role zip)."""
    roles = {q.role for q in spec.qis if q.role}
    has_zip = "zip" in roles or any(q.kind == "zip" for q in spec.qis)
    return [r for r in REQUIRED_ROLES if r not in roles and (r != "zip" or has_zip)]


def safe_harbor(problem: Problem) -> SafeHarbor:
    """Build Safe Harbor for ``problem``; the spec must give the age role, and the zip role to its
    ZIP.  A spec with no ZIP QI at all (no QI of kind zip, none with role zip) releases no ZIP
    among its QIs, so the ZIP rule has nothing to cut and the other rules make Safe Harbor (an
    extract of ages, dates and categories, issue 42); a ZIP QI without its role is refused, as
    the rule would silently skip it."""
    roles = {q.role: i for i, q in enumerate(problem.spec.qis) if q.role}
    missing = missing_roles(problem.spec)
    if missing:
        raise SpecError(
            f"the spec gives no QI the role {' or '.join(repr(m) for m in missing)}, and Safe Harbor cannot be "
            f"built without it; add role = \"{missing[0]}\" to the [[qi]] that holds it"
        )
    zi, ai = roles.get("zip"), roles["age"]
    age_domain = problem.domains[ai]
    if zi is not None and problem.domains[zi].kind not in ("zip", "category"):
        raise SpecError(f"QI {problem.spec.qis[zi].name!r} has role zip but kind {problem.domains[zi].kind}; use "
                        f"kind = \"zip\"")
    if not isinstance(age_domain, IntegerDomain):
        raise SpecError(f"QI {problem.spec.qis[ai].name!r} has role age but is not an integer QI")
    populations = prefix_populations(problem) if problem.population is not None and zi is not None else None
    qis: list[QIRecoding] = []
    restricted: tuple[str, ...] = ()
    for i, domain in enumerate(problem.domains):
        if i == zi:
            zq = problem.spec.qis[zi]
            rec, restricted = _zip_recoding(domain, populations, zq.null_label if zq.nulls == "category" else None)
            qis.append(rec)
        elif i == ai:
            qis.append(_age_recoding(age_domain))
        elif problem.spec.qis[i].role == "date" and isinstance(domain, DateDomain):
            qis.append(_year_recoding(domain))
        else:
            qis.append(QIRecoding(np.arange(domain.size), tuple(domain.text(p) for p in range(domain.size))))
    return SafeHarbor(Recoding(tuple(qis), "safe-harbor"), populations, restricted,
                      problem.spec.qis[zi].name if zi is not None else None)


def prefix_populations(problem: Problem) -> dict[str, int]:
    """People per 3-digit ZIP prefix in the whole population table (all ages, all cells)."""
    qi = next(q for q in problem.spec.qis if q.role == "zip")
    domain = problem.domains[problem.spec.qi_names.index(qi.name)]
    types = problem.backend.columns(POPULATION_VIEW)
    key = source_key(qi, domain, col(qi.population_column), types.get(qi.population_column))
    prefix = exp.Substring(this=key, start=exp.Literal.number(1), length=exp.Literal.number(ZIP_PREFIX))
    count = exp.func("sum", exp.cast(col(str(problem.spec.count_column)), "DOUBLE"))
    query = (exp.select(exp.alias_(prefix, "prefix"), exp.alias_(count, "people"))
             .from_(POPULATION_VIEW).where(exp.Not(this=exp.Is(this=key.copy(), expression=exp.null())))
             .group_by(exp.column("prefix")))
    rows = problem.backend.execute(query).to_pylist()
    return {str(r["prefix"]): int(round(r["people"])) for r in rows}


def _zip_recoding(domain: Domain, populations: dict[str, int] | None,
                  null_label: str | None = None) -> tuple[QIRecoding, tuple[str, ...]]:
    """ZIP -> 3-digit prefix or 000; the NULL category (``null_label``) is kept as it is."""

    def is_restricted(prefix: str) -> bool:
        if populations is None:
            return prefix in HHS_2000_PREFIXES
        return populations.get(prefix, 0) <= PREFIX_LIMIT

    labels: dict[str, int] = {}
    group = np.empty(domain.size, dtype=np.int64)
    restricted: set[str] = set()
    for pos in range(domain.size):
        text = domain.text(pos)
        prefix = text if text == null_label else text[:ZIP_PREFIX]
        if text != null_label and is_restricted(prefix):
            restricted.add(prefix)
            prefix = "000"
        group[pos] = labels.setdefault(prefix, len(labels))
    return QIRecoding.from_groups(domain, group, list(labels)), tuple(sorted(restricted))


def _age_recoding(domain: IntegerDomain) -> QIRecoding:
    ages = np.arange(domain.lo, domain.hi + 1)
    old = ages >= AGE_LIMIT
    group = np.where(old, int(np.count_nonzero(~old)), np.arange(ages.size))
    labels = [str(a) for a in ages[~old]] + ([f"{AGE_LIMIT}+"] if old.any() else [])
    return QIRecoding.from_groups(domain, group, labels)


def _year_recoding(domain: DateDomain) -> QIRecoding:
    years: defaultdict[int, list[int]] = defaultdict(list)
    for pos in range(domain.size):
        years[domain.value(pos).year].append(pos)
    group = np.empty(domain.size, dtype=np.int64)
    labels = []
    for g, (year, members) in enumerate(sorted(years.items())):
        group[members] = g
        labels.append(str(year))
    return QIRecoding.from_groups(domain, group, labels)
