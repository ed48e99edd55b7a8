"""Release-ledger benchmark (issue 41): what judging a release with its recipient's earlier ones adds to the gate.

A recipient who keeps every release links them by the stable pseudonym, so the gate judges a new
release to them twice: alone, and on its persons' combined labels with every earlier release in the
ledger (``release/union.py``: one join of this release's persons with the ledger's, the combined
labels grouped, g from the census of the intersections).  This script builds --persons persons (one
row each; QIs age, sex and a five-digit ZIP against a census), records --months - 1 earlier monthly
releases of the same persons to one recipient (the policies differ from month to month, so the
combined labels are finer than any one release's), and times the gate's measure of
the next month's release:

- **alone**: the gate of a release nobody records (no ledger);
- **recorded, first release**: the gate of a release recorded to a recipient nobody released to
  yet: it reads every released person's pseudonym and labels for the ledger entry, which a
  recorded release keeps whether or not earlier releases exist;
- **with the ledger**: the same recorded gate reading the 11 earlier releases and judging the union;

each min of --runs, interleaved, for two shapes of the same rows and ledger: **rows** (no
``[person]``: the gate alone reads only the released labels, one small GROUP BY) and **persons**
(``[person]`` on the pseudonymized key: the gate alone counts each group's distinct pseudonyms).
Writing the entry (``Ledger.append``, once per release) is timed apart.

Target (issue 41): judging the union adds <= 1.5x to a release's gate time at 1 M persons x 12
monthly releases: "with the ledger" / "recorded, first release" <= 2.5 (what the union's lookup
and figures add to the gate of a recorded release).  The script also prints what the whole ledger
(the entry's persons read, and the union) adds to the gate alone and to the release itself (its
rows computed, pseudonyms included, and written, then judged).

    python bench/ledger.py [--persons 1000000] [--months 12] [--runs 3] [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from figures import figure

from deid_sql import Problem
from deid_sql.ledger.store import Entry, Ledger, key_fingerprint
from deid_sql.release.gate import ReleaseSource, build_gate
from deid_sql.release.output import materialize_query, measure_file
from deid_sql.release.plan import plan_of
from deid_sql.release.union import ledger_qis

KEY = "bench-ledger-" + "7c2f9e41a8d3b6054e1f2a9c7d8b3e60"
ZIPS = 400
SPEC = """[source]
path = "persons.parquet"
[population]
path = "census.parquet"
count = "people"

[[qi]]
name = "age"
kind = "integer"
min = 0
max = 99

[[qi]]
name = "sex"
kind = "category"
values = ["F", "M"]

[[qi]]
name = "zip"
kind = "zip"

[columns]
pseudonymize = ["person_id"]
secret_env = "DEID_BENCH_LEDGER_KEY"

[release]
min_k = 1
recipient = "monthly"
"""
PERSON = """
[person]
column = "person_id"
"""


def build(folder: Path, persons: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    zips = np.array([f"{37000 + i:05d}" for i in range(ZIPS)])
    ages = rng.integers(0, 90, persons)
    pq.write_table(pa.table({"person_id": pa.array([f"p{i:08d}" for i in range(persons)]),
                             "age": ages, "sex": rng.choice(["F", "M"], persons),
                             "zip": zips[rng.integers(0, ZIPS, persons)]}), folder / "persons.parquet")
    cells = [(a, s, z) for a in range(100) for s in ("F", "M") for z in zips]
    people = rng.integers(5, 400, len(cells)) + 0
    pq.write_table(pa.table({"age": [c[0] for c in cells], "sex": [c[1] for c in cells],
                             "zip": [c[2] for c in cells], "people": people}), folder / "census.parquet")
    spec = folder / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    return spec


POLICIES = ("age:every=10|zip:digits=3", "age:every=5|sex:top|zip:digits=3", "age:every=20|zip:digits=4",
            "age:cuts=18,30,45,65,90|zip:digits=3")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--persons", type=int, default=1_000_000)
    ap.add_argument("--months", type=int, default=12)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="100,000 persons, 4 months, 2 runs")
    args = ap.parse_args()
    if args.quick:
        args.persons, args.months, args.runs = 100_000, 4, 2
    os.environ["DEID_BENCH_LEDGER_KEY"] = KEY
    with tempfile.TemporaryDirectory(prefix="deid-bench-ledger-") as tmp:
        folder = Path(tmp)
        spec = build(folder, args.persons, args.seed)
        with Problem.from_spec(spec, cache=False) as problem:
            released = ReleaseSource.from_problem(problem)
            # the earlier months: each its own policy, recorded as the gate would (persons and labels)
            t0 = time.perf_counter()
            appends = []
            for month in range(args.months - 1):
                plan = plan_of(problem, POLICIES[month % len(POLICIES)])
                gate = build_gate(released, plan, "bench")
                gate.ledger = None
                gate.measure(problem.backend.execute, problem.query(plan, measuring=True))
                assert gate.rows_counted is None
                from deid_sql.release.union import released_persons

                persons = released_persons(problem.backend.execute, problem.query(plan, measuring=True),
                                           "person_id", gate.qi_columns, None, gate.census)
                fingerprint = key_fingerprint(KEY.encode())
                entry = Entry(seq=0, recipient="monthly", release=f"month-{month + 1}", created_at=f"m{month + 1}",
                              key_fingerprint=fingerprint,
                              spec=str(spec), spec_sha256=None, policy=plan.text, record_sha256="-", target="bench",
                              persons=args.persons, rows=0, held=0,
                              qis=ledger_qis(plan.recoding, problem.spec.qi_names),
                              content_sha256="", previous="", hash="")
                a0 = time.perf_counter()
                with Ledger(folder / "deid-sql-ledger.duckdb") as ledger:
                    ledger.append(entry, persons)
                appends.append(time.perf_counter() - a0)
            print(f"{args.persons:,} persons, {args.months - 1} earlier months recorded in "
                  f"{time.perf_counter() - t0:.1f} s (append: min {min(appends):.2f} s)", file=sys.stderr)
            figure("ledger append", min(appends))
            plan = plan_of(problem, POLICIES[(args.months - 1) % len(POLICIES)])
            # the gate of a file release measures the file written (release.output.measure_file)
            path = folder / "month.parquet"
            w0 = time.perf_counter()
            pq.write_table(problem.backend.execute(problem.query(plan)), path)
            written = time.perf_counter() - w0  # the release's own rows: pseudonyms computed, file written
        # the same rows and ledger judged twice: as rows (no [person]: the gate alone reads only the labels)
        # and as persons ([person]: the gate alone counts each group's distinct pseudonyms)
        for shape, text in (("rows", SPEC), ("persons", SPEC + PERSON)):
            spec.write_text(text, encoding="utf-8")
            with Problem.from_spec(spec, cache=False) as problem:
                measure_shape(problem, shape, path, written, args)
                measure_release(problem, shape, folder, args)


def measure_shape(problem: Problem, shape: str, path: Path, written: float, args: argparse.Namespace) -> None:
    """Time the gate of the file at ``path`` three ways, interleaved, min of --runs: alone (not recorded),
    recorded as a recipient's first release (the persons' tuples read for the entry, nothing to join) and
    recorded with the union of the earlier releases."""
    released = ReleaseSource.from_problem(problem)
    plan = plan_of(problem, POLICIES[(args.months - 1) % len(POLICIES)])
    times: dict[str, list[float]] = {"alone": [], "first": [], "union": []}
    found: dict[str, Any] = {}
    for _ in range(args.runs):
        for way in times:
            gate = build_gate(released, plan, "bench")
            if way == "alone":
                gate.ledger = None
            elif way == "first":  # a recipient nobody released to yet: no ledger file
                assert gate.ledger is not None
                gate.ledger = replace(gate.ledger, location=path.parent / "no-ledger-yet.duckdb")
            s = time.perf_counter()
            found[way] = measure_file(gate, path, "parquet")
            times[way].append(time.perf_counter() - s)
    alone, first, union = (min(times[w]) for w in ("alone", "first", "union"))
    judged = found["union"]
    assert judged.union is not None and len(judged.union.earlier) == args.months - 1
    assert found["first"].union is None
    added = union / first - 1
    print(f"[{shape}] gate alone {alone:.3f} s (k = {found['alone'].k}); recorded as a first release {first:.3f} s; "
          f"with {args.months - 1} earlier releases {union:.3f} s (union k = {judged.union.k})")
    print(f"[{shape}] judging the union adds {added:.2f}x to a recorded release's gate (target <= 1.5x); "
          f"the ledger (entry's persons read, union judged) adds {union / alone - 1:.2f}x to the gate alone")
    print(f"[{shape}] the release itself (its rows computed and written, then judged alone) "
          f"{written + alone:.2f} s; the union adds {(union - first) / (written + alone):.2f}x of it, "
          f"the ledger {(union - alone) / (written + alone):.2f}x")
    figure(f"ledger gate alone ({shape})", alone)
    figure(f"ledger gate recorded, first release ({shape})", first)
    figure(f"ledger gate with union ({shape})", union)
    figure(f"ledger union added ratio ({shape})", added, "x")
    figure(f"ledger added to the gate alone ({shape})", union / alone - 1, "x")
    figure(f"ledger added to the release ({shape})", (union - alone) / (written + alone), "x")


def measure_release(problem: Problem, shape: str, folder: Path, args: argparse.Namespace) -> None:
    """The whole release as ``materialize`` makes it (judged before the write, written, the file judged
    and recorded), three ways as in ``measure_shape``: not recorded, recorded as a recipient's first
    release (a new ledger, its entry appended) and recorded with the earlier releases (a copy of the
    ledger, the entry appended to it); min of up to 3 runs, interleaved."""
    released = ReleaseSource.from_problem(problem)
    plan = plan_of(problem, POLICIES[(args.months - 1) % len(POLICIES)])
    times: dict[str, list[float]] = {"alone": [], "first": [], "union": []}
    for run in range(min(args.runs, 3)):
        for way in times:
            ledger = folder / f"release-{way}-{run}.duckdb"
            if way == "union":
                shutil.copyfile(folder / "deid-sql-ledger.duckdb", ledger)
            gate = build_gate(released, plan, "bench", recorded=way != "alone")
            if gate.ledger is not None:
                gate.ledger = replace(gate.ledger, location=ledger)
            out = folder / f"release-{way}-{run}.parquet"
            s = time.perf_counter()
            materialize_query(problem, problem.query(plan), out, gate=gate)
            times[way].append(time.perf_counter() - s)
            for done in folder.glob(f"release-{way}-{run}.*"):
                done.unlink()
    alone, first, union = (min(times[w]) for w in ("alone", "first", "union"))
    print(f"[{shape}] the whole release (materialize): not recorded {alone:.2f} s; recorded as a first release "
          f"{first:.2f} s; with {args.months - 1} earlier releases {union:.2f} s (the ledger adds "
          f"{union / alone - 1:.2f}x, the union {union / first - 1:.2f}x)")
    figure(f"ledger release not recorded ({shape})", alone)
    figure(f"ledger release recorded, first ({shape})", first)
    figure(f"ledger release with union ({shape})", union)


if __name__ == "__main__":
    main()
