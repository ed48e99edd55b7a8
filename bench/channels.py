"""Channel-expansion benchmark of deid-sql: the §7 simulation of seed 003 (Garfinkel, Gopal,
Thompson 2007) — Tables 4 and 5 beside the paper's, LP time per instance, and a 1 M-subject
release materialized through DuckDB with its time and peak RSS.

The paper's claim is practical: the channel LP (11)–(16) of a 1 M-subject data set with 200
input channels and 2,048 candidate output channels solves "within 10 seconds" (CPLEX 9), few
output channels suffice (Table 4), and few subjects land in the all-channel output d_0 even
when risk is pervasive (Table 5).  deid-sql counts input channels with one GROUP BY, solves
the LP with HiGHS and releases rows with compiled SQL, so this script checks both halves:
the LP on the fixture's per-channel counts, then the whole release from a Parquet file.

1. Table 4: 15 % of subjects at risk, u = 0.1, b = 0.15, output channels 1 … 2,048 (nested);
2. LP time of the 200 x 2,048 instance (best of 3) against the paper's 10 s;
3. Table 5 (share in d_0) and the Ω grid (Figure 7) over proportion at risk x RT, LP and whole subjects;
4. the release: ``job.solve`` + ``write_release`` to Parquet and DuckDB, the CLI in a child for its
   peak RSS, a plain DuckDB COPY of the same rows as floor; 5. a summary.

Targets: one 200 x 2,048 LP <= 5 s; the whole Table 5 grid <= 5 min; releasing 1 M subjects
(solve + SQL in DuckDB) <= 10 s with peak RSS <= 2 GB.

    python bench/channels.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
from scipy.optimize import linprog

from deid_sql.channels.assignment import Assignment, whole_subjects
from deid_sql.channels.candidates import OutputChannels, generate
from deid_sql.channels.inputs import InputChannels, RiskRule
from deid_sql.channels.job import solve
from deid_sql.channels.program import Program, build, solve_lp
from deid_sql.channels.write import write_release
from deid_sql.errors import DeidError
from deid_sql.fixtures.channels import BASE_B, BASE_U, WEIGHTS, Simulated, simulate, simulated_spec, write_simulated

SUBJECTS, QUICK_SUBJECTS = 1_000_000, 100_000
MAX_SIZE, SEED, CANDIDATES = 8, 0, 2048  # §7 rules: at most 8 input channels per output channel, 2,048 of them
T4_SHARE = 0.15
T4_PAPER = {1: (100.00, 0.00), 2: (97.44, 0.00), 4: (55.26, 0.00), 8: (37.21, 0.00), 16: (16.88, 0.00),
            32: (9.54, 0.00), 64: (8.39, 15.63), 128: (7.94, 50.78), 256: (7.82, 74.22), 512: (7.51, 86.72),
            1024: (7.51, 93.36), 2048: (7.51, 96.68)}  # N: Ω x 100, % output channels unused
QUICK_T4 = (1, 4, 16, 64, 256, 1024, 2048)
RTS, QUICK_RTS = (1.0, 1.2, 1.4, 1.6, 1.8), (1.0, 1.4, 1.8)
SHARES = tuple(round(0.02 * i, 2) for i in range(1, 11))  # the paper's first row is "<= 0.12"
QUICK_SHARES = (0.12, 0.16, 0.20)
T5_PAPER = {0.14: (0.002, 0.001, 0, 0, 0), 0.16: (0.011, 0.003, 0.002, 0, 0), 0.18: (0.017, 0.011, 0.007, 0.002, 0),
            0.20: (0.022, 0.017, 0.013, 0.004, 0.001)}  # share in d_0 per RT; rows <= 0.12 are all 0
PAPER_LP_S = 10.0  # "Solutions for each scenario were obtained within 10 seconds" (CPLEX V9.0)
LP_TARGET_S, GRID_TARGET_S, RELEASE_TARGET_S, RSS_TARGET_MIB = 5.0, 300.0, 10.0, 2048.0
RELEASE_RT = 1.2
REPEATS = 3

Row = tuple[str, str, bool | None]  # target, measured, pass (None: information only)


def out(line: str = "") -> None:
    """Print a report line at once (the full run takes minutes)."""
    print(line, flush=True)


def inputs_of(sim: Simulated) -> InputChannels:
    """The fixture's counts as input channels keyed (lab_a, lab_b) as text and sorted like the
    job's GROUP BY sorts them, so candidate draws match ``deid-sql channels`` on the same data."""
    keys = [(str(r // 20), str(r % 20)) for r in range(len(sim.counts))]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    return InputChannels(("lab_a", "lab_b"), tuple(keys[r] for r in order), ("none", "v1", "v2"), sim.counts[order])


def rule_at(rt: float) -> RiskRule:
    """§7's tolerance: u_1 = u_2 = 0.1 RT, b = 0.15 RT, c = (0.5, 1)."""
    return RiskRule(u=np.array([np.inf, BASE_U * rt, BASE_U * rt]), b=BASE_B * rt, c=np.array([0.0, *WEIGHTS]))


@dataclass(frozen=True)
class Solved:
    """An LP solution; ``failure`` is solve_lp's error when the bench had to re-solve it itself."""

    x: np.ndarray
    seconds: float
    failure: str = ""


def lp(program: Program) -> Solved:
    """``solve_lp``; when it raises, the same program with ψ divided by m (same optimum x), so the
    tables still show the instance — the failure is counted and reported as a library bug."""
    try:
        s = solve_lp(program)
        return Solved(s.x, s.seconds)
    except DeidError as e:
        start = time.perf_counter()
        res = linprog(program.cost / program.inputs.total, A_ub=program.a_ub, b_ub=program.b_ub,
                      A_eq=program.a_eq, b_eq=program.b_eq, method="highs",
                      bounds=np.column_stack([np.zeros(program.n_vars), program.upper]))
        if res.status != 0:
            raise
        return Solved(np.clip(res.x, 0.0, None), time.perf_counter() - start, str(e).split(";")[0])


def part_table4(subjects: int, ns: tuple[int, ...], rows: list[Row]) -> int:
    """Table 4: Ω and unused share as the candidate set grows; returns how many LPs solve_lp failed."""
    inputs = inputs_of(simulate(T4_SHARE, subjects=subjects, seed=SEED))
    rule = rule_at(1.0)
    classes = rule.classify(inputs)
    full = generate(inputs, classes, CANDIDATES, MAX_SIZE, SEED)
    # generate() emits candidates grouped by size (all ~1,030 pairs first), so a plain prefix would hold
    # only pairs up to N ~ 1,000.  The prefix is taken in a seeded random order of the generated ones:
    # the sets are nested (each contains the previous, as in "solved repeatedly using increasingly large
    # numbers of output channels") and every N sees the §7 size mix.
    order = [0, *(1 + np.random.default_rng(SEED).permutation(len(full) - 1))]
    mix = ", ".join(f"{s}: {n}" for s, n in enumerate(np.bincount(full.sizes[1:])) if n)
    out(f"  {inputs.total:,} subjects, {len(inputs.keys)} input channels, {int(classes.risky.sum())} risky "
        f"({inputs.sizes[classes.risky].sum() / inputs.total:.2%} of subjects); generated sizes {{{mix}}}")
    out(f"  {'N':>6} {'Ω x 100':>8} {'paper':>7} {'% unused':>9} {'paper':>7} {'used':>5} {'in d_0':>7} "
        f"{'vars':>6} {'rows':>6} {'LP s':>6}")
    failures = 0
    omega = float("nan")
    for n in ns:
        idx = order[:n]
        outputs = OutputChannels(members=tuple(full.members[i] for i in idx), origin=tuple(full.origin[i] for i in idx))
        program = build(inputs, classes, rule, outputs)
        s = lp(program)
        a = Assignment(program, s.x)
        failures += bool(s.failure)
        omega = 100 * a.omega
        paper = T4_PAPER[n]
        out(f"  {n:>6,} {omega:>7.2f}{'†' if s.failure else ' '} {paper[0]:>7.2f} {100 * (1 - a.used.mean()):>9.2f} "
            f"{paper[1]:>7.2f} {int(a.used.sum()):>5} {a.all_channel_share:>7.2%} {program.n_vars:>6,} "
            f"{program.n_constraints:>6,} {s.seconds:>6.2f}")
    if failures:
        out(f"  † solve_lp raised ({failures} of {len(ns)}: 'HiGHS could not solve the channel LP', HiGHS status 4); "
            f"the figures are the same program re-solved by the bench with ψ / m (library bug, see summary)")
    out("  (paper: 54 of 64 output channels used, 63 of 128, 68 of 512; Ω levels off from ~500 output channels)")
    rows.append((f"Table 4: Ω x 100 with {ns[-1]:,} output channels (paper 7.51)", f"{omega:.2f}", None))
    return failures


def part_timing(subjects: int, rows: list[Row]) -> int:
    """The 200 x 2,048 LP at 15 % at risk, RT = 1: best of REPEATS, against the paper's 10 s."""
    sim = simulate(T4_SHARE, subjects=subjects, seed=SEED)
    rule = rule_at(1.0)
    setup, solves, failures = [], [], 0
    for _ in range(REPEATS):
        start = time.perf_counter()
        inputs = inputs_of(sim)
        classes = rule.classify(inputs)
        program = build(inputs, classes, rule, generate(inputs, classes, CANDIDATES, MAX_SIZE, SEED))
        setup.append(time.perf_counter() - start)
        s = lp(program)
        failures += bool(s.failure)
        solves.append(s.seconds)
    best = min(solves)
    out(f"  program: {program.n_vars:,} variables, {program.n_constraints:,} constraints ({len(program.outputs):,} "
        f"output channels)")
    out(f"  classify + generate + build: best {min(setup):.3f} s; HiGHS LP: best {best:.3f} s, worst "
        f"{max(solves):.3f} s of {REPEATS}{' (solve_lp failed, re-solved)' if failures else ''}")
    out(f"  LP / paper's {PAPER_LP_S:.0f} s (CPLEX 9, 2007 PC): {best / PAPER_LP_S:.3f}; LP / setup "
        f"{best / min(setup):.1f}x")
    rows.append((f"LP 200 x {CANDIDATES:,} at 15 %, RT = 1, best of {REPEATS} <= {LP_TARGET_S:.0f} s", f"{best:.3f} s",
                 best <= LP_TARGET_S and not failures))
    return failures


def part_table5(subjects: int, shares: tuple[float, ...], rts: tuple[float, ...], rows: list[Row]) -> int:
    """Table 5 and the Ω grid: one simulated data set per proportion at risk, 2,048 candidates per cell."""
    start = time.perf_counter()
    cells: dict[tuple[float, float], tuple[float, float, float, bool]] = {}  # d_0 share, Ω LP, Ω whole, failed
    realized: dict[float, float] = {}
    lp_max, failures, repaired = 0.0, 0, 0
    for share in shares:
        inputs = inputs_of(sim := simulate(share, subjects=subjects, seed=SEED))
        realized[share] = sim.at_risk
        for rt in rts:
            rule = rule_at(rt)
            classes = rule.classify(inputs)
            program = build(inputs, classes, rule, generate(inputs, classes, CANDIDATES, MAX_SIZE, SEED))
            s = lp(program)
            a, (whole, repairs) = Assignment(program, s.x), whole_subjects(program, s.x)
            lp_max, failures = max(lp_max, s.seconds), failures + bool(s.failure)
            repaired += not repairs.clean
            cells[share, rt] = a.all_channel_share, 100 * a.omega, 100 * whole.omega, bool(s.failure)
    grid_s = time.perf_counter() - start
    head = "".join(f"{f'RT {rt:.1f}':>15}" for rt in rts)
    out("  share of subjects in d_0, ours | paper (paper's '<= 0.12' row is all 0; † solve_lp failed)")
    out(f"  {'at risk (realized)':<20}{head}")
    paper_col = [RTS.index(rt) for rt in rts]
    for share in shares:
        paper = T5_PAPER.get(share, (0,) * len(RTS)) if share <= 0.12 or share in T5_PAPER else None
        row = "".join(f"{cells[share, rt][0]:>8.3f}{'†' if cells[share, rt][3] else ' '}|"
                      f"{'-' if paper is None else f'{paper[j]:g}':<5}" for rt, j in zip(rts, paper_col))
        out(f"  {f'{share:.2f} ({realized[share]:.3f})':<20}{row}")
    low = [s for s in shares if s <= 0.12]
    if low:
        row = "".join(f"{max(cells[s, rt][0] for s in low):>8.3f} |{0:<5}" for rt in rts)
        out(f"  {'<= 0.12 (max)':<20}{row}")
    out()
    out("  Ω x 100 (Figure 7 analogue): LP | whole subjects (largest-remainder rounding + repair, what is released)")
    out(f"  {'at risk':<20}{head}")
    for share in shares:
        out(f"  {share:<20.2f}" + "".join(f"{cells[share, rt][1]:>7.2f} |{cells[share, rt][2]:<6.2f}" for rt in rts))
    out("  note: at RT = 1 the simulated data sit exactly on the bounds (P(v) = u = 0.1, Σc·P = b = 0.15 overall), so "
        "the safe channels' slack equals the risky ones' excess")
    out("  and every used output channel must hit its bounds exactly; whole subjects cannot, and the repair ends "
        "near Ω = 1 (d_0)")
    out(f"  {len(cells)} instances in {grid_s:.1f} s (simulate, classify, generate, build, LP, rounding); max LP "
        f"{lp_max:.3f} s; {repaired} needed a repair after rounding")
    worst = max(cells[s, rt][0] for s in shares for rt in rts)
    rows.append((f"Table 5 grid ({len(cells)} instances) <= {GRID_TARGET_S / 60:.0f} min", f"{grid_s:.1f} s",
                 grid_s <= GRID_TARGET_S))
    rows.append((f"Table 5: max LP <= {LP_TARGET_S:.0f} s", f"{lp_max:.3f} s", lp_max <= LP_TARGET_S))
    rows.append(("Table 5: largest share in d_0 (paper 0.022)", f"{worst:.3f}", None))
    return failures




HWM = "deid-bench-vmhwm"
REPORT_HWM = (f"import atexit; atexit.register(lambda: print('{HWM}', "
              "open('/proc/self/status').read().split('VmHWM:')[1].split()[0]))")


@dataclass(frozen=True)
class Child:
    """A finished child process: its output, wall time, peak RSS and exit code."""

    text: str
    seconds: float
    hwm_mib: float  # VmHWM the child printed at exit: its own peak (NaN if it died before printing)
    rusage_mib: float  # ru_maxrss from wait4, floored at this process's peak (see measured_run)
    code: int


def measured_run(code: str, args: list[str], cwd: Path) -> Child:
    """Run ``python -c code args`` to its end; the child prints its VmHWM at exit.

    Why not ru_maxrss (RUSAGE_CHILDREN, or wait4 for this child alone): on Linux a child's maxrss
    starts at the parent's peak RSS, carried across vfork + exec, so once this process has solved
    the grid every child would report at least its peak.  VmHWM belongs to the child's own
    address space, created by exec, so it measures the release alone."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", f"{REPORT_HWM}\n{code}", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    text = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    lines = text.splitlines()
    hwm = [float(line.split()[1]) / 1024 for line in lines if line.startswith(HWM + " ")]
    rest = "\n".join(line for line in lines if not line.startswith(HWM + " "))
    return Child(rest, seconds, hwm[-1] if hwm else float("nan"), usage.ru_maxrss / 1024, proc.returncode)


def sql_str(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def part_release(subjects: int, folder: Path, rows: list[Row]) -> None:
    """The release end to end from Parquet, timed in process and measured (RSS) through the CLI."""
    start = time.perf_counter()
    sim = simulate(T4_SHARE, subjects=subjects, seed=SEED)
    data = write_simulated(sim, folder / "cohort.parquet", seed=SEED)
    spec = folder / "spec.toml"
    spec.write_text(simulated_spec("cohort.parquet", RELEASE_RT, 'integer = "never"'), encoding="utf-8")
    out(f"  setup (not timed below): simulate + write_simulated {sim.total:,} rows ({data.stat().st_size / 2**20:.1f} "
        f"MiB Parquet) in {time.perf_counter() - start:.2f} s; RT = {RELEASE_RT} (u = {BASE_U * RELEASE_RT:g}, "
        f"b = {BASE_B * RELEASE_RT:g}), integer = \"never\"")
    con = duckdb.connect()
    start = time.perf_counter()
    con.execute(f"COPY (SELECT subject_id, name FROM read_parquet({sql_str(data)})) TO "
                f"{sql_str(folder / 'floor.parquet')} (FORMAT parquet)")
    floor_pq = time.perf_counter() - start
    start = time.perf_counter()
    con.execute(f"ATTACH {sql_str(folder / 'floor.duckdb')} AS floor_db")
    con.execute(f"CREATE TABLE floor_db.t AS SELECT subject_id, name FROM read_parquet({sql_str(data)})")
    con.execute("DETACH floor_db")
    floor_db = time.perf_counter() - start
    out(f"  floor: DuckDB COPY (SELECT subject_id, name ...) TO parquet {floor_pq:.2f} s; CREATE TABLE in a .duckdb "
        f"file {floor_db:.2f} s")
    start = time.perf_counter()
    with solve(spec) as job:
        solve_s = time.perf_counter() - start
        start = time.perf_counter()
        written = write_release(job, out=folder / "release.parquet", overwrite=True)
        pq_s = time.perf_counter() - start
        start = time.perf_counter()
        write_release(job, out=folder / "release.duckdb", overwrite=True)
        db_s = time.perf_counter() - start
        c = written.check
        times = ", ".join(f"{k} {v:.2f} s" for k, v in job.seconds.items())
        out(f"  solve() {solve_s:.2f} s ({times}); {len(job.program.outputs):,} output channels, "
            f"{job.program.n_vars:,} variables")
        out(f"  LP Ω = {job.lp.objective / job.inputs.total ** 2:.4%}; released Ω = {job.whole.omega:.4%} "
            f"({job.route}); {job.whole.all_channel_share:.3%} in d_0; {job.repairs.describe()}")
        out(f"  write_release's check, (6)/(8) recomputed from the released rows ({c.how}): max P(v|w) - u = "
            f"{c.worst_u:.3g}, max Σc·P(v|w) - b = {c.worst_b:.3g}")
        job_psi = job.lp.objective
    inputs = inputs_of(sim)  # the bench's own path on the same counts: same instance, same optimum
    rule = rule_at(RELEASE_RT)
    classes = rule.classify(inputs)
    program = build(inputs, classes, rule, generate(inputs, classes, CANDIDATES, MAX_SIZE, SEED))
    bench_psi = Assignment(program, lp(program).x).objective
    out(f"  same instance through the bench's direct path: Ψ {bench_psi:,.0f} vs the job's {job_psi:,.0f} "
        f"(relative difference {abs(bench_psi - job_psi) / job_psi:.1e})")
    n_pq = con.execute(f"SELECT count(*) FROM read_parquet({sql_str(folder / 'release.parquet')})").fetchone()
    con.execute(f"ATTACH {sql_str(folder / 'release.duckdb')} AS rel (READ_ONLY)")
    n_db = con.execute("SELECT count(*), count(DISTINCT output_channel) FROM rel.released").fetchone()
    con.close()
    assert n_pq is not None and n_db is not None
    total_pq, total_db = solve_s + pq_s, solve_s + db_s
    out(f"  release.parquet: write_release {pq_s:.2f} s, {n_pq[0]:,} rows; solve + write {total_pq:.2f} s = "
        f"{total_pq / floor_pq:.1f}x the COPY floor")
    out(f"  release.duckdb:  write_release {db_s:.2f} s, {n_db[0]:,} rows in {n_db[1]:,} output channel labels; "
        f"solve + write {total_db:.2f} s = {total_db / floor_db:.1f}x the CREATE TABLE floor")
    cli = measured_run("from deid_sql.cli import main; main()",
                       ["channels", str(spec), "--out", str(folder / "cli.parquet")], folder)
    rss = cli.hwm_mib
    out(f"  CLI: deid-sql channels spec.toml --out cli.parquet (exit {cli.code}, {cli.seconds:.2f} s wall with "
        f"interpreter start, peak RSS {rss:,.0f} MiB); its output:")
    for line in cli.text.splitlines():
        out(f"    | {line}")
    floor = measured_run("import duckdb; duckdb.connect().execute(\"COPY (SELECT subject_id, name FROM read_parquet("
                         f"{sql_str(data)})) TO {sql_str(folder / 'floor2.parquet')} (FORMAT parquet)\")", [], folder)
    out(f"  floor in a child (python + duckdb COPY): {floor.seconds:.2f} s wall, peak RSS {floor.hwm_mib:,.0f} MiB; "
        f"CLI / floor: {cli.seconds / floor.seconds:.1f}x time, {rss / floor.hwm_mib:.1f}x RSS")
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out(f"  (peak RSS = the child's VmHWM; wait4's ru_maxrss says {cli.rusage_mib:,.0f} / {floor.rusage_mib:,.0f} MiB, "
        f"floored at this process's own peak, {own:,.0f} MiB)")
    n = f"{subjects / 1e6:g} M" if subjects >= 1_000_000 else f"{subjects:,}"
    rows.append((f"release {n} subjects to Parquet (solve + write) <= {RELEASE_TARGET_S:.0f} s", f"{total_pq:.2f} s",
                 total_pq <= RELEASE_TARGET_S))
    rows.append((f"release {n} subjects to DuckDB (solve + write) <= {RELEASE_TARGET_S:.0f} s", f"{total_db:.2f} s",
                 total_db <= RELEASE_TARGET_S))
    rows.append((f"CLI release peak RSS <= {RSS_TARGET_MIB / 1024:.0f} GB", f"{rss:,.0f} MiB",
                 cli.code == 0 and rss <= RSS_TARGET_MIB))
    rows.append(("released rows = subjects (Parquet, DuckDB)", f"{n_pq[0]:,}/{n_db[0]:,}",
                 n_pq[0] == n_db[0] == subjects))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_SUBJECTS:,} subjects and fewer grid points (a smoke run under a minute)")
    args = parser.parse_args(argv)
    subjects = QUICK_SUBJECTS if args.quick else SUBJECTS
    ns = QUICK_T4 if args.quick else tuple(T4_PAPER)
    shares, rts = (QUICK_SHARES, QUICK_RTS) if args.quick else (SHARES, RTS)
    out("deid-sql channel-expansion benchmark: seed 003 §7 (Garfinkel, Gopal, Thompson 2007)")
    out(f"  python {sys.version.split()[0]}, duckdb {duckdb.__version__}, {os.cpu_count()} CPUs; {subjects:,} subjects"
        f"{' (--quick)' if args.quick else ''}, 200 input channels, P(v1) = P(v2) = 0.1, seed {SEED}")
    out()
    rows: list[Row] = []
    out(f"== 1. Table 4: output channels 1 … {ns[-1]:,}, {T4_SHARE:.0%} at risk, u = {BASE_U}, b = {BASE_B} ==")
    failures = part_table4(subjects, ns, rows)
    out()
    out(f"== 2. LP time: 200 input x {CANDIDATES:,} output channels ==")
    failures += part_timing(subjects, rows)
    out()
    out(f"== 3. Table 5 and Ω grid: proportion at risk x RT, {CANDIDATES:,} candidates each ==")
    failures += part_table5(subjects, shares, rts, rows)
    out()
    out(f"== 4. Release of {subjects:,} subjects (SQL in DuckDB) ==")
    with tempfile.TemporaryDirectory(prefix="deid-channels-") as tmp:
        part_release(subjects, Path(tmp), rows)
    out()
    rows.append(("solve_lp solves every LP of sections 1-3", f"{failures} failed", failures == 0))
    out("== 5. Summary ==")
    for target, measured, ok in rows:
        out(f"  target {target:<62} {measured:>14}   {'info' if ok is None else '✓' if ok else '✗'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
