"""The Python API: one de-identification problem, wired from its spec.

``Problem.from_spec(path)`` reads the spec, opens the backend, checks the data,
aggregates source and population to cells once, and builds both evaluators.
Everything else — evaluating, compiling, writing — is a method here or a function
that takes a ``Problem``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

import numpy as np
from sqlglot import exp

from .backends import Backend, local
from .backends.lazy import LazyBackend
from .compiler.compile import compile_source, from_relation, generalize, to_sql
from .compiler.suppression import Suppression
from .contract.pseudonym import type_problems
from .contract.roles import apply_roles
from .domains.cuts import allowed_mask
from .domains.domain import Domain, can_label
from .domains.hierarchy import Hierarchy
from .domains.recoding import Recoding
from .errors import DeidError, OutputError, PolicyError, SpecError
from .evaluate import Evaluator, Metrics
from .evaluate.fast import FastEvaluator
from .evaluate.riskmodel import risk_model
from .evaluate.sqlpath import SQLEvaluator
from .invocation import CACHE_CELLS
from .loading.cache import CachedLoad, CacheKey, CellsCache, files_only
from .loading.cells import Cells
from .loading.collation import spelling_notes
from .loading.load import (
    POPULATION_VIEW,
    SOURCE_VIEW,
    Table,
    aggregate,
    aggregate_weights,
    open_table,
    raise_if,
    resolve_domains,
)
from .loading.person_rows import check_person_release, derived_columns, person_rows
from .loading.shifting import shift_source, source_shift
from .loading.transform import transform_source
from .policies.lattice import Lattice, Policy, parse_release
from .registry import RISK_MODELS
from .spec.file import Spec
from .sqltext import col, person_key

if TYPE_CHECKING:
    from .contract.keys import KeyHolder


class Generalization(Protocol):
    """What a release query needs of a plan: its recoding and its suppression.

    ``release.plan.ReleasePlan`` is the one kind every release path passes; it is built above this
    module (by ``plan_of``, which takes a ``Problem``), so the query names only what it reads."""

    @property
    def recoding(self) -> Recoding: ...

    @property
    def suppression(self) -> Suppression | None: ...


class Problem:
    """A loaded problem: spec, backend, domains, lattice, cells and evaluators."""

    def __init__(self, spec: Spec, backend: Backend, domains: list[Domain], lattice: Lattice,
                 sample: Cells, population: Cells | None, columns: dict[str, str],
                 source: exp.Expression | Callable[[], exp.Expression]) -> None:
        self.spec = spec
        self.backend = backend
        self.domains = domains
        self.lattice = lattice
        self.sample = sample
        self.population = population
        self.columns = columns
        self._source_rows: int | None = None
        self._source = source
        sizes = [d.size for d in domains]
        # risk is normalized by the original data's, constrained lattice or not (seed 000 eq. 2-3,
        # METHODS): figures of a constrained search compare with every other run's
        bottom, top = lattice.original(), lattice.top().recoding()
        self.record_risk = risk_model(spec, self.population_total, records=sample.total)
        # summed sampling weights are fractional people: the integer prefix cube would round them
        self._fast_path = FastEvaluator(sample, population, sizes, spec.gamma, record_risk=self.record_risk,
                                        **({"cube_limit": 0} if spec.weights is not None else {}))
        self.fast = Evaluator(self._fast_path, sample, bottom, top)
        self._sql: Evaluator | None = None
        self._scratch: Backend | None = None
        self.notes: list[str] = []  # what validate says beside the figures (collated or padded text QIs)
        self.order_notes: list[str] = []  # QI domains put in their hierarchy's order (``cuts.hierarchy_domain``)
        #: the cells cache entry of this load (hit or stored), where derived counts are kept beside the
        #: cells (``loading.sensitive``); None when the load is not cached
        self.cells_cache: CellsCache | None = None
        self.cache_key: CacheKey | None = None

    @property
    def source(self) -> exp.Expression:
        """The source as a FROM-able expression of the engine (made when first asked: making it
        may need the engine, which a load from the cache has not connected yet)."""
        if not isinstance(self._source, exp.Expression):
            self._source = self._source()
        return self._source

    @property
    def population_total(self) -> int:
        """People in the population table (the sample's records with ``population = "sample"``;
        the summed sampling weights with ``[weights]``)."""
        return int((self.population or self.sample).total)

    @property
    def population_size(self) -> float:
        """The population's size N: the spec's ``population = { size }``, else the census's or the
        weights' total, else the sample's (``population = "sample"``: the sample is all there is)."""
        return float(self.spec.population_size or self.population_total)

    def groups(self, item: Policy | Recoding | str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The released groups of ``item`` that hold sample records: m, the census count and
        g = max(census, m) (METHODS.md decision 1), from the cells."""
        return self._fast_path.groups(self.recoding(item))

    def group_sizes(self, recoding: Recoding, ids: list[np.ndarray], m: np.ndarray) -> np.ndarray:
        """g = max(census, m) of groups of ``recoding`` given by their group id per QI, sorted
        (``evaluate.groups.CensusCounts.group_sizes``, the fast path's census): the full-domain
        evaluator groups cells its own way and needs only the census of its groups."""
        return self._fast_path.census.group_sizes(recoding, ids, m)

    def require_monotone_risk(self, what: str) -> None:
        """Refuse a search that prunes by monotone risk when the risk model is not monotone."""
        check = getattr(self.record_risk, "monotonicity_problem", None)
        reason = check() if check is not None else None
        if reason:
            fix = ("change the [adversary] parameters or use --risk-model population" if self.spec.risk == "adversary"
                   else "use --risk-model population, or benedetti-franconi without [weights]")
            raise DeidError(f"{what} needs risk that never rises with generalization, but {reason}; {fix}")

    # -- construction -----------------------------------------------------------------
    @classmethod
    def from_spec(cls, spec: Spec | str | Path, backend: Backend | None = None, risk: str | None = None,
                  check_roles: bool = False,
                  cache: bool | CellsCache | None = None) -> Problem:
        """Load a problem; raises one ``SpecError``/``DataError`` listing every problem.
        ``risk`` overrides the spec's risk model (its parameters: ``Spec.with_feature``).
        ``check_roles`` adds the column-role problems (``validate``); evaluating needs no roles,
        so by default only the paths that release rows or SQL check them (``query``).
        ``cache``: reuse (and store) the cells of an earlier load of the same data
        (``loading.cache``); True for the user's cache folder, a ``CellsCache`` for another, None
        for the command line's choice (on in the CLI unless ``--no-cache``, off in a library)."""
        spec = spec if isinstance(spec, Spec) else Spec.read(spec)
        if not spec.qis:
            raise SpecError(f"spec {spec.path} declares no [[qi]]; it only describes a channel expansion — "
                            f"run 'deid-sql channels {spec.path.name}', or add [[qi]] tables")
        if risk is not None:
            if risk not in RISK_MODELS:
                raise SpecError(f"risk {risk!r} must be one of {', '.join(RISK_MODELS.names())}")
            spec = replace(spec, risk=risk)
        # connected on first use: a load whose cells come from the cache may need no engine at all
        backend = backend or cast(Backend, LazyBackend(spec.backend.engine, spec.backend.options()))
        try:
            return cls._load(spec, backend, check_roles, _cells_cache(cache))
        except BaseException:
            backend.close()
            raise

    @classmethod
    def _load(cls, spec: Spec, backend: Backend, check_roles: bool = False,
              cache: CellsCache | None = None) -> Problem:
        problems: list[str] = []
        if spec.weights is not None:
            cache = None  # the cache keeps whole counts; summed weights are read each time
        key, cached, source, population = _without_engine(spec, backend, cache)
        if source is None:
            source = open_table(backend, spec, "source", problems)
            population = open_table(backend, spec, "population", problems) if spec.population else None
        # role problems are reported with the data's, after every data check has run
        roles = role_problems(spec, source.columns) if check_roles and source is not None else []
        if problems:
            raise_if(problems + roles)
        assert source is not None
        if cache is not None and key is None:
            key = cache.key(spec, backend, source.view, population.view if population else None)
            cached = cache.get(key) if key is not None else None
        order_notes: list[str] = []  # domains put in their hierarchy's order (validate says so)
        domains, hierarchies = resolve_domains(backend, spec, source, population, problems,
                                               cached.values if cached is not None else None, order_notes)
        problems += outside_label_problems(spec, domains)
        if problems:
            raise_if(problems + roles)
        # how a collated or padded text QI is compared: validate's notes, and beside its problems
        notes = (spelling_notes(backend, spec, [d for d in domains if d is not None], source)
                 if check_roles and cached is None else [])
        resolved = [d for d in domains if d is not None]
        allowed = allowed_cuts(spec, resolved, hierarchies, problems)  # reported with the data's problems
        stored = False  # the cache holds this load's entry (for the counts kept beside the cells)
        if cached is not None and _fits(cached, resolved, population is not None):
            sample_cells, pop_cells = cached.sample, cached.population
            stored = True
        else:
            sample_cells = aggregate(backend, spec, resolved, source, problems)
            pop_cells = aggregate(backend, spec, resolved, population, problems) if population else None
            if cache is not None and key is not None and not problems and sample_cells is not None:
                tables = {"source": source.columns} | ({"population": population.columns} if population else {})
                stored = cache.put(key, spec, resolved, sample_cells, pop_cells, tables) is not None
        if spec.weights is not None and sample_cells is not None and not problems:
            pop_cells = aggregate_weights(backend, spec, resolved, source, problems)
        if spec.population_size is not None and sample_cells is not None and spec.population_size < sample_cells.total:
            problems.append(f"population size {spec.population_size:,} is smaller than the sample "
                            f"({sample_cells.total:,} records); a population holds its sample: fix population size")
        # beside the data's problems: the columns whose other spellings are among the rows outside the domain
        raise_if(problems + ([line for rows, line in notes if rows] if problems else []) + roles)
        assert sample_cells is not None
        lattice = Lattice(spec.qi_names, resolved, hierarchies, allowed)
        text_cols = {q.column: q.kind in ("category", "zip") for q in spec.qis}
        # a pseudonymized CSV column is hashed as the file's text (ID 007 stays 007 on every engine)
        text_cols |= {c: True for c in spec.columns.pseudonymize if c in source.columns and c not in text_cols}
        if source_shift(spec) and spec.person is not None:  # the offset hashes the key's text, as a pseudonym
            text_cols.setdefault(spec.person.column, True)
        columns = source.columns

        def relation() -> exp.Expression:  # dates of [columns] shift moved, QIs transformed: as every release reads
            stored = backend.relation(spec.source, text_cols)
            return transform_source(spec, shift_source(backend, spec, stored, columns), columns)

        problem = cls(spec, backend, resolved, lattice, sample_cells, pop_cells, source.columns, relation)
        problem.notes = [line for _, line in notes]
        problem.order_notes = order_notes
        if stored:
            problem.cells_cache, problem.cache_key = cache, key
        return problem

    def close(self) -> None:
        if self._scratch is not None:
            self._scratch.close()
        self.backend.close()

    def __enter__(self) -> Problem:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- policies -----------------------------------------------------------------------
    def policy(self, text: str | Policy) -> Policy:
        """Parse a policy text (see ``Lattice.parse``) or pass a policy through."""
        if isinstance(text, Policy):
            if text.lattice.names != self.lattice.names or len(text.bits) != self.lattice.nbits:
                raise PolicyError("the policy belongs to a different problem (other QIs or domains)")
            if self.lattice.constrained:
                self.lattice.policy(text.bits)  # refuses a cut the spec does not allow
            return text
        return self.lattice.parse(text)

    def item(self, text: str | Policy | Recoding) -> Policy | Recoding:
        """What a policy text names (``policies.lattice.parse_release``): the lattice policy, or a
        recoding when a hierarchy level groups values that are not adjacent in the domain."""
        return parse_release(self.lattice, text) if isinstance(text, str) else text

    def recoding(self, item: Policy | Recoding | str) -> Recoding:
        """The recoding of a policy (text or object), or a recoding checked against the domains."""
        if isinstance(item, Recoding):
            if len(item.qis) != len(self.domains) or any(
                    q.group_of.size != d.size for q, d in zip(item.qis, self.domains)):
                raise PolicyError("the recoding does not match this problem's QI domains")
            return item
        resolved = self.item(item)
        return resolved if isinstance(resolved, Recoding) else resolved.recoding()

    # -- evaluation ---------------------------------------------------------------------
    @property
    def sql(self) -> Evaluator:
        """The SQL-path evaluator (built on first use)."""
        if self._sql is None:
            sizes = [d.size for d in self.domains]
            path = SQLEvaluator(self._sql_backend(), self.sample, self.population, sizes, self.spec.gamma,
                                record_risk=self.record_risk)
            self._sql = Evaluator(path, self.sample, self.lattice.original(), self.lattice.top().recoding())
        return self._sql

    def _sql_backend(self) -> Backend:
        """Where the SQL reference path runs: the problem's engine when it runs Python UDFs;
        else a local DuckDB over the cells (only cells reached Python; no rows move)."""
        if self.backend.python_udfs:
            return self.backend
        if self._scratch is None:
            self._scratch = local()
        return self._scratch

    def evaluate(self, item: Policy | Recoding | str, path: str = "fast") -> Metrics:
        """Metrics of a policy (text or object) or recoding; ``path`` is "fast" or "sql" (any other
        is an error: silently evaluating on the fast path would pass off its figures as the SQL's)."""
        evaluator = self._evaluator(path)
        if isinstance(item, str):
            item = self.item(item)
        if isinstance(item, Policy):
            return evaluator.evaluate(self.policy(item))
        return evaluator.evaluate(self.recoding(item))

    def evaluate_many(self, items: Iterable[Policy | Recoding | str], path: str = "fast") -> list[Metrics]:
        self._evaluator(path)  # an unknown path fails before the first item
        return [self.evaluate(i, path) for i in items]

    def _evaluator(self, path: str) -> Evaluator:
        if path == "fast":
            return self.fast
        if path == "sql":
            return self.sql
        raise DeidError(f"unknown evaluation path {path!r}; use 'fast' (cells, numpy) or 'sql' (the reference)")

    # -- SQL ------------------------------------------------------------------------------
    def query(self, plan: Generalization, source: exp.Expression | None = None, roles: bool = True,
              persistent: bool = False, measuring: bool = False, keys: KeyHolder | None = None) -> exp.Select:
        """The generalizing ``SELECT`` of a release plan (``release.plan.plan_of``: its recoding and
        suppression) as a sqlglot expression (source = the spec's source).

        With ``roles`` (every release path) it releases only declared columns, in release
        order (``released_columns``), and raises ``SpecError`` for a column without a role;
        ``roles=False`` is the raw query of every source column, for a caller that wraps it
        and applies the roles to its own outer select (``contract.roles.apply_roles``).
        ``persistent``: the SQL will be stored (a view, printed SQL, a dbt model), which a
        pseudonymizing release refuses, since the SQL holds the key.  ``measuring``: the query the
        gate measures a stored release by, which with ``[person]`` carries the person key even
        where the stored SQL drops it, so the gate counts persons (``check_person_release``).
        ``keys``: who computes the pseudonyms (``contract.keys``); SQL whose holder keeps the key
        out of it (``Udfs``) may be stored though it pseudonymizes (the caller shifts its source)."""
        recoding, suppression = plan.recoding, plan.suppression
        columns: dict[str, str | None] = dict(self.columns)
        relation = source if source is not None else self.source.copy()
        person = (person_key(col(self.spec.person.column), columns.get(self.spec.person.column))
                  if self.spec.person is not None else None)  # persons told apart byte for byte
        column_roles = self.spec.columns
        if self.spec.person is not None:  # every row of a person carries the person's values
            check_person_release(self.spec, persistent or measuring)
            if measuring and column_roles.role(self.spec.person.column) not in ("keep", "pseudonymize"):
                column_roles = replace(column_roles, keep=(*column_roles.keep, self.spec.person.column),
                                       drop=tuple(c for c in column_roles.drop if c != self.spec.person.column))
            columns |= derived_columns(self.spec)
            relation = person_rows(self.spec, self.domains, columns, relation)
        outside = self.spec.columns.outside_label
        for q, r in zip(self.spec.qis, recoding.qis):
            if r.n_groups > 1 and outside in r.labels:  # one group (a hierarchy's "*" top) tells nothing apart
                raise PolicyError(f"QI {q.name}: a group is labelled {outside!r}, the label of values outside the "
                                  f"domain; set [columns] outside_label to a text no group has")
        query = generalize(recoding, self.spec.qis, self.domains, relation, columns, suppression,
                           outside_label=self.spec.columns.outside_label, person=person)
        if not roles:
            return query
        if persistent and (keys is None or keys.holds_key):
            self.refuse_persistent()
        self.check_pseudonym_types()
        return apply_roles(query, column_roles, [q.column for q in self.spec.qis], self.backend,
                           self.source_label, copy=False, keys=keys,  # the query was built here
                           blank_suppressed=not measuring)  # the gate counts suppressed persons by their key

    @property
    def source_rows(self) -> int:
        """The source's rows: the records without ``[person]``; with it, the rows of all persons (one
        ``count(*)`` where the data is, the first time a release needs it to check what it wrote)."""
        if self.spec.person is None:
            return self.sample.total
        if self._source_rows is None:
            # the source may be a query (the dates of [columns] shift moved: ``shifting``)
            query = exp.select(exp.alias_(exp.func("count", exp.Star()), "n")).from_(from_relation(self.source.copy()))
            self._source_rows = int(self.backend.execute(query).column("n")[0].as_py())
        return self._source_rows

    @property
    def released_columns(self) -> list[tuple[str, str]]:
        """``(name, role)`` of every released column in release order (QIs ``qi``; the
        suppression flag, when a path adds one, is not listed here); raises ``SpecError`` when a
        source column has no role."""
        names = list(self.columns) + list(derived_columns(self.spec))
        return self.spec.columns.released(names, [q.column for q in self.spec.qis], self.source_label)

    @property
    def source_label(self) -> str:
        return f"source {self.spec.source.describe()}"

    def refuse_persistent(self) -> None:
        """Refuse to store SQL that pseudonymizes or shifts dates: it would hold the key."""
        hashed = [c for c in self.spec.columns.pseudonymize if c in self.columns] + list(source_shift(self.spec))
        if hashed:
            names = ", ".join(repr(c) for c in hashed)
            raise OutputError(
                f"a view, compiled SQL or dbt model would hold the secret key in its SQL text: [columns] pseudonymize "
                f"or shift lists {names} (HMAC under the key in ${self.spec.columns.secret_env}); write the release "
                f"with deid-sql materialize instead, or list the column under drop")

    def check_pseudonym_types(self) -> None:
        """Refuse pseudonymizing a column whose text differs between engines (see ``type_problems``)."""
        problems = _type_problems(self.spec, self.columns)
        if problems:
            raise SpecError(problems)

    def compile(self, plan: Generalization, dialect: str = "duckdb", table: str | None = None,
                pretty: bool = True) -> str:
        """The SQL text of a release plan for ``dialect``.  For a CSV/Parquet source, DuckDB SQL reads the file in
        place; otherwise the query selects from ``table`` (default: the source's table
        name inside its DuckDB file, else ``source``)."""
        source = compile_source(self.spec.source, self.source, dialect, table,
                                lambda stored: transform_source(self.spec, stored, self.columns))
        query = self.query(plan, source, persistent=True)  # built here, rendered once: no copy
        return to_sql(query, dialect, pretty=pretty, copy=False)

    @property
    def source_view(self) -> str:
        return SOURCE_VIEW


def _without_engine(spec: Spec, backend: Backend | LazyBackend, cache: CellsCache | None,
                    ) -> tuple[CacheKey | None, CachedLoad | None, Table | None, Table | None]:
    """A load of files from the cache that leaves the engine unconnected: the key (files need no
    engine to be fingerprinted), the entry, and the tables as the entry recorded them; the session
    views are made when the engine first connects.  (None, None, None, None) otherwise."""
    if cache is None or not isinstance(backend, LazyBackend) or backend.connected or not files_only(spec):
        return None, None, None, None
    key = cache.key(spec, None, SOURCE_VIEW, POPULATION_VIEW if spec.population else None)
    cached = cache.get(key) if key is not None else None
    if cached is None or cached.columns is None or "source" not in cached.columns:
        return key, cached, None, None
    if spec.population is not None and "population" not in cached.columns:
        return key, cached, None, None

    def views(engine: Backend) -> None:
        found: list[str] = []
        open_table(engine, spec, "source", found)
        if spec.population is not None:
            open_table(engine, spec, "population", found)
        raise_if(found)  # the files changed under a running command: say what, never query half of it

    backend.after_connect = views
    source = Table(SOURCE_VIEW, cached.columns["source"], "source")
    population = Table(POPULATION_VIEW, cached.columns["population"], "population") if spec.population else None
    return key, cached, source, population


def _cells_cache(cache: bool | CellsCache | None) -> CellsCache | None:
    if isinstance(cache, CellsCache):
        return cache
    if cache is None:
        cache = CACHE_CELLS.get()
    return CellsCache() if cache else None


def _fits(cached: CachedLoad, domains: Sequence[Domain], population: bool) -> bool:
    """Whether a cached load's cells index these domains (a damaged or foreign entry does not)."""
    sizes = np.array([d.size for d in domains], dtype=np.int64)
    for cells in (cached.sample, cached.population):
        if cells is None:
            continue
        p = cells.positions
        if p.ndim != 2 or p.shape[1] != len(domains) or len(cells.counts) != p.shape[0]:
            return False
        if p.size and ((p < 0).any() or (p.max(axis=0) >= sizes).any()):
            return False
    return (cached.population is not None) == population and len(cached.sample) > 0


def allowed_cuts(spec: Spec, domains: list[Domain], hierarchies: dict[str, Hierarchy],
                 problems: list[str]) -> dict[str, np.ndarray]:
    """Per constrained QI, the boundaries its ``cuts``/``zip_digits``/``date_cuts`` allow on its
    resolved domain (``cuts.allowed_mask``); problems (a listed category not in the data, a
    hierarchy level that is not interval-shaped) are collected with the data's."""
    out: dict[str, np.ndarray] = {}
    for q, domain in zip(spec.qis, domains):
        if q.cuts is not None:
            mask = allowed_mask(q.cuts, domain, hierarchies.get(q.name), f"[[qi]] {q.name!r}", problems)
            if mask is not None:
                out[q.name] = mask
    return out


def role_problems(spec: Spec, columns: dict[str, str]) -> list[str]:
    """The column-role problems of ``spec`` against the source's ``columns`` (name -> type): unroled,
    missing or QI-listed columns, pseudonymized columns of an unstable type, a missing key."""
    where = f"source {spec.source.describe()}"
    out = spec.columns.problems(list(columns), [q.column for q in spec.qis], where) + _type_problems(spec, columns)
    if spec.columns.pseudonymize:
        try:
            spec.columns.secret()
        except SpecError as e:
            out.extend(e.problems)
    return out


def _type_problems(spec: Spec, columns: dict[str, str]) -> list[str]:
    if spec.source.format == "csv":  # read as text (see ``Problem._load``): the file's text is hashed
        return []
    present = [c for c in spec.columns.pseudonymize if c in columns]
    return type_problems(present, columns, f"source {spec.source.describe()}")


def outside_label_problems(spec: Spec, domains: list[Domain | None]) -> list[str]:
    """An outside label that some policy could also show for in-domain values (a category, an
    interval ``45-64``, a ZIP prefix ``3****``, a set ``A|B``) would make out-of-domain records look
    like members of that group (or the group look suppressed): refused, since the release could
    not tell them apart."""
    outside = spec.columns.outside_label
    return [f"QI {q.name}: the outside label {outside!r} is also a label a policy can show for values of the "
            f"domain; set [columns] outside_label to a text no group can have, e.g. \"(outside)\""
            for q, d in zip(spec.qis, domains) if d is not None and can_label(d, outside)]
