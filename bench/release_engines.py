"""The release gate where the data is: a gated ``materialize`` into a table of the engine against the
plain ``CREATE TABLE AS SELECT *`` of the same rows, same engine, same run (``bench/release.py --engine``).

After one untimed warm-up pair, each run alternates the two, so drift of the machine's speed hits
both alike; the target table is dropped before each write, outside the clock.  Every statement the gated
release sends is timed
(``Traced``), so the report breaks the release down into its stages: the staging write, the count of
the written rows per released group with their row hash, the sidecar and the swap, and the time in
Python between statements.  The load (domains, census and cells: one pass over the source and one
over the population) is timed apart, as information: the ratio is of the release of a loaded problem.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from sqlglot import exp

from deid_sql.backends import connect
from deid_sql.loading.cache import CellsCache
from deid_sql.problem import Problem
from deid_sql.release.output import materialize
from deid_sql.release.plan import plan_of

PG_TARGET = 3.0
SPARK_TARGET = 3.0
TABLES = ("deid_bench_cohort", "deid_bench_population")


def out(line: str = "") -> None:
    print(line, flush=True)


def stage_of(sql: str) -> str:
    """The stage of a release a statement belongs to, by what it does."""
    whole = " ".join(sql.split()).upper()
    head = whole[:400]
    if head.startswith("CREATE TABLE") and "DEID_STAGING" in head:
        return "sidecar" if '"SIDECAR"' in head or "`SIDECAR`" in head else "staging write"
    if "GROUP BY" in whole and head.startswith("SELECT"):
        return "written rows counted per group, hashed"
    if head.startswith("SELECT COUNT(*)"):
        return "written rows counted"
    return "other statements"


class Traced:
    """A backend's statements timed by stage, while ``on``: its ``execute`` (queries read back) and
    ``_run`` (statements: the staging write, the sidecar).  What the engine's catalog and swap run
    directly is left in the time between statements."""

    def __init__(self, backend: Any) -> None:
        self.stages: dict[str, float] = defaultdict(float)
        self.on = False
        for method in ("execute", "_run"):
            setattr(backend, method, self._timed(backend, getattr(backend, method)))

    def _timed(self, backend: Any, method: Callable[..., Any]) -> Callable[..., Any]:
        def timed(query: Any, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(query, *args, **kwargs)
            finally:
                if self.on:
                    text = query if isinstance(query, str) else backend.render(query)
                    self.stages[stage_of(text)] += time.perf_counter() - start
        return timed


def postgres_tables(dsn: str, cohort: Path, population: Path, rows: int) -> None:
    """The cohort and the population as tables of the server (reloaded when the row count differs)."""
    with connect("postgres", dsn=dsn) as pg:
        have = pg.con.execute(f"SELECT to_regclass('public.{TABLES[0]}')").fetchone()[0]
        n = pg.con.execute(f"SELECT count(*) FROM public.{TABLES[0]}").fetchone()[0] if have else 0
        if n == rows:
            return
        start = time.perf_counter()
        for name, path in zip(TABLES, (cohort, population)):
            pg.register_table(f"load_{name}", pq.read_table(path))
            pg.con.execute(f'DROP TABLE IF EXISTS "public"."{name}"')
            pg.con.execute(f'CREATE TABLE "public"."{name}" AS SELECT * FROM "load_{name}"')
            pg.con.execute(f'ANALYZE "public"."{name}"')
        try:  # the copy's dirty pages written now, not by a checkpoint in the middle of the timed runs
            pg.con.execute("CHECKPOINT")
        except Exception:  # noqa: BLE001 - a role without pg_checkpoint: the warm-up pair absorbs some of it
            pass
        out(f"  {rows:,} rows copied into PostgreSQL in {time.perf_counter() - start:.1f} s")


def postgres_spec(spec: Path, cohort: Path, population: Path, dsn: str) -> Path:
    text = spec.read_text(encoding="utf-8")
    text = text.replace(f'path = "{cohort.name}"', f'table = "public.{TABLES[0]}"')
    text = text.replace(f'path = "{population.name}"', f'table = "public.{TABLES[1]}"')
    other = spec.with_name("release-bench-postgres.toml")
    other.write_text(text + f'\n[backend]\nengine = "postgres"\ndsn = "{dsn}"\n', encoding="utf-8")
    return other


def spark_spec(spec: Path, cohort: Path, population: Path, folder: Path) -> Path:
    text = spec.read_text(encoding="utf-8")
    text = text.replace(f'path = "{cohort.name}"', f'path = "{cohort.resolve().as_posix()}"')
    text = text.replace(f'path = "{population.name}"', f'path = "{population.resolve().as_posix()}"')
    warehouse = (folder / "spark-warehouse").resolve().as_posix()
    other = spec.with_name("release-bench-spark.toml")
    other.write_text(text + f'\n[backend]\nengine = "spark"\nmaster = "local[2]"\n'
                            f'[backend.conf]\n"spark.sql.warehouse.dir" = "{warehouse}"\n', encoding="utf-8")
    return other


def part_engine(engine: str, spec: Path, rows: int, runs: int, policy: str, target: float,
                figures: dict[str, float]) -> tuple[float, bool]:
    """The gated release into a table of ``engine`` against its plain CREATE TABLE AS of the source's
    rows; the load timed uncached and cached (the cells cache) as information. (ratio, met)."""
    with tempfile.TemporaryDirectory() as held:
        cache = CellsCache(Path(held))
        start = time.perf_counter()
        with Problem.from_spec(spec, cache=cache) as problem:
            problem.backend.execute(exp.select(exp.Literal.number(1)))  # connected, as a command would be
            uncached = time.perf_counter() - start
        start = time.perf_counter()
        with Problem.from_spec(spec, cache=cache) as problem:
            cached = time.perf_counter() - start
            ratio, met, gate = _runs(engine, problem, rows, runs, policy, target, figures)
    out(f"  load (domains, census, cells; connecting): uncached {uncached:.2f} s, cached {cached:.2f} s")
    out(f"  whole command (load + gated release): uncached {uncached + gate:.2f} s "
        f"({(uncached + gate) / figures[f'{engine} plain CREATE TABLE AS']:.2f}x plain), cached {cached + gate:.2f} s "
        f"({(cached + gate) / figures[f'{engine} plain CREATE TABLE AS']:.2f}x plain) — "
        f"{'cached faster' if cached < uncached else 'cached NOT faster'}")
    figures[f"{engine} load uncached"] = uncached
    figures[f"{engine} load cached"] = cached
    return ratio, met and cached < uncached


def _runs(engine: str, problem: Problem, rows: int, runs: int, policy: str, target: float,
          figures: dict[str, float]) -> tuple[float, bool, float]:
    problem.backend.execute(exp.select(exp.Literal.number(1)))  # a LazyBackend connects on first use
    backend = getattr(problem.backend, "_real", problem.backend)
    traced = Traced(backend)
    plan = plan_of(problem, policy)
    schema = "public." if engine == "postgres" else ""

    def drop(name: str) -> None:
        for table in (f"{schema}{name}__release", f"{schema}{name}"):
            backend.drop(None, table)

    def plain() -> float:
        drop("deid_bench_plain")
        write = exp.Create(this=exp.to_table(f"{schema}deid_bench_plain"), kind="TABLE",
                           expression=exp.select("*").from_(problem.source.copy()))
        start = time.perf_counter()
        backend._run(write)
        return time.perf_counter() - start

    def gated() -> tuple[float, dict[str, float]]:
        drop("deid_bench_gated")
        traced.stages.clear()
        traced.on = True
        start = time.perf_counter()
        written = materialize(problem, plan, None, table=f"{schema}deid_bench_gated")
        took = time.perf_counter() - start
        traced.on = False
        assert written.verdict is not None and written.verdict.passed and written.rows == rows
        stages = dict(traced.stages)
        stages["catalog, swap and python"] = took - sum(stages.values())
        return took, stages

    plain()  # a warm-up pair, untimed: the source in the engine's cache, Spark's code generated
    gated()
    bare, gate, breakdown = [], [], []
    for _ in range(runs):  # alternate, so drift of the machine's speed hits both alike
        bare.append(plain())
        took, stages = gated()
        gate.append(took)
        breakdown.append(stages)
    drop("deid_bench_plain")
    drop("deid_bench_gated")
    ratio, met = report(engine, bare, gate, breakdown, target, figures)
    return ratio, met, statistics.median(gate)


def report(engine: str, bare: list[float], gate: list[float], breakdown: list[dict[str, float]], target: float,
           figures: dict[str, float]) -> tuple[float, bool]:
    p, g = statistics.median(bare), statistics.median(gate)
    ratios = [x / y for x, y in zip(gate, bare)]
    ratio = statistics.median(ratios)
    out(f"  plain CREATE TABLE AS SELECT *   median {p:.2f} s  (runs: {', '.join(f'{x:.2f}' for x in bare)})")
    out(f"  gated materialize --table        median {g:.2f} s  (runs: {', '.join(f'{x:.2f}' for x in gate)})")
    out(f"  ratio gated / plain              median {ratio:.2f} "
        f"(pairs: {', '.join(f'{r:.2f}' for r in ratios)}; target <= {target})")
    middle = breakdown[sorted(range(len(gate)), key=gate.__getitem__)[len(gate) // 2]]
    out("  breakdown of the median gated run (seconds, share of the plain write):")
    for stage, seconds in sorted(middle.items(), key=lambda kv: -kv[1]):
        out(f"    {stage:<42} {seconds:6.2f}  {seconds / p:5.2f}x")
    figures[f"{engine} plain CREATE TABLE AS"] = p
    figures[f"{engine} gated materialize"] = g
    return ratio, ratio <= target


def run_engine(engine: str, spec: Path, cohort: Path, population: Path, rows: int, runs: int, policy: str,
               figures: dict[str, float], dsn: str | None, folder: Path) -> tuple[float, bool] | None:
    """One engine's part; None when it cannot run here (said in one line)."""
    if engine == "postgres":
        if not dsn:
            out("  postgres: skipped (set DEID_TEST_POSTGRES_DSN; .ci/postgres.sh starts a server)")
            return None
        postgres_tables(dsn, cohort, population, rows)
        return part_engine(engine, postgres_spec(spec, cohort, population, dsn), rows, runs, policy, PG_TARGET,
                           figures)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("DEID_SQL_SPARK_HOME", str(folder / "spark-home"))
    return part_engine(engine, spark_spec(spec, cohort, population, folder), rows, runs, policy, SPARK_TARGET,
                       figures)
