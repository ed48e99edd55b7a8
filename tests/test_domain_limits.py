"""Domains too large for the lattice and the evaluators are refused before anything is sized
by them (issue 19: ``max = 1000000000`` grew ``validate`` to 24 GB, or printed a numpy
traceback under a memory cap); a domain at the limit still validates and evaluates."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from deid_sql.backends.duckdb import DuckDBBackend
from deid_sql.domains import limits
from deid_sql.domains.domain import IntegerDomain
from deid_sql.errors import SpecError
from deid_sql.evaluate.fast import FastEvaluator
from deid_sql.loading.cells import Cells
from deid_sql.policies.lattice import Lattice
from deid_sql.spec.file import Spec

from .conftest import AGE_QI, DEFAULT_QIS, RACE_QI, SEX_QI, ZIP_QI

CAP = 2 * 2**30  # address space of the CLI subprocesses: far below what a 10^9-value domain needs
AT_LIMIT = AGE_QI.replace("max = 120", f"max = {limits.MAX_QI_VALUES - 1}")
HUGE = AGE_QI.replace("max = 120", "max = 1000000000")


_CLI = """
import atexit, os, resource
peak = lambda: str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
atexit.register(lambda: open(os.environ["RSS_FILE"], "w").write(peak()))
from deid_sql.cli import main
main()
"""


def _capped(*args: object, cwd: Path) -> tuple[subprocess.CompletedProcess[str], float, int]:
    """Run the CLI in a subprocess under an address-space cap; (result, seconds, its peak RSS in MB)."""
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))

    rss = cwd / "rss.txt"
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-c", _CLI, *map(str, args)], capture_output=True, text=True,
                            cwd=cwd, preexec_fn=cap, timeout=300, env={**os.environ, "RSS_FILE": str(rss)})
    seconds = time.monotonic() - start
    peak = int(rss.read_text()) // 1024
    rss.unlink()
    return result, seconds, peak


def _risk(output: str) -> float:
    """The risk of the one policy ``evaluate`` printed (an object, or a list of one)."""
    printed = json.loads(output)
    return float((printed[0] if isinstance(printed, list) else printed)["risk"])


@pytest.mark.slow
def test_huge_integer_domain_is_refused_in_one_line_under_a_memory_cap(project):
    spec = project.spec(qis=(HUGE,) + DEFAULT_QIS[1:])
    result, seconds, _ = _capped("validate", spec, cwd=project.dir)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "numpy" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "QI 'age'" in lines[0] and "1,000,000,001 values" in lines[0]
    assert f"{limits.MAX_QI_VALUES:,}" in lines[0] and "coarser" in lines[0]
    assert seconds < 60


def test_every_command_refuses_the_huge_domain_from_the_spec(project, run):
    spec = project.spec(qis=(HUGE,) + DEFAULT_QIS[1:])
    for args in (("validate", spec), ("evaluate", spec, "-p", "top"), ("compile", spec, "-p", "top")):
        result = run(*args, expect=2)
        assert "1,000,000,001 values" in result.output
    with pytest.raises(SpecError, match="coarser"):
        Spec.read(spec)


def test_a_huge_date_domain_is_refused_with_the_other_problems(project, run):
    date_qi = '[[qi]]\nname = "seen"\ncolumn = "age"\nkind = "date"\nmin = 0001-01-01\nmax = 9999-12-31\n'
    spec = project.spec(qis=(HUGE, date_qi) + DEFAULT_QIS[1:], top="gamma2 = 1")
    out = run("validate", spec, expect=2).output
    assert "QI 'age'" in out and "QI 'seen'" in out and "3,652,059 values" in out
    assert "by month" in out and "gamma2" in out  # every problem is reported at once


def test_domains_too_large_together_are_refused(project):
    qis = tuple(AT_LIMIT.replace('name = "age"', f'name = "a{i}"\ncolumn = "c{i}"') for i in range(5))
    spec = project.spec(qis=qis + DEFAULT_QIS[1:])
    with pytest.raises(SpecError) as err:
        Spec.read(spec)
    assert len(err.value.problems) == 1
    assert f"{limits.MAX_TOTAL_VALUES:,}" in str(err.value) and "5,000,006 values together" in str(err.value)


def test_categories_read_from_data_are_counted_without_reading_them_all(project, run, monkeypatch):
    monkeypatch.setattr(limits, "MAX_QI_VALUES", 5)  # the census has 10 ZIP codes
    fetched: list[int] = []
    execute = DuckDBBackend.execute

    def spy(self, query, params=None):  # type: ignore[no-untyped-def]
        result = execute(self, query, params)
        if result.column_names == ["v"]:  # the distinct values of a domain read from data
            fetched.append(result.num_rows)
        return result

    monkeypatch.setattr(DuckDBBackend, "execute", spy)
    columns = '[columns]\ndrop = ["patient_id", "age"]\nsensitive = ["diagnosis"]\n'
    spec = project.spec(qis=(SEX_QI, RACE_QI, ZIP_QI), columns=columns)
    out = run("validate", spec, expect=2).output
    assert "QI 'zip'" in out and "over 5 distinct values" in out and "ZIP3" in out
    assert fetched == [6]  # one past the limit is read, not all 10


def test_api_structures_refuse_huge_domains_before_allocating():
    with pytest.raises(SpecError, match="1,000,000,001 values"):
        Lattice(["age"], [IntegerDomain(0, 10**9)])
    cells = Cells(np.zeros((1, 1), dtype=np.int32), np.ones(1, dtype=np.int64))
    with pytest.raises(SpecError, match="#1"):
        FastEvaluator(cells, None, [10**9])


@pytest.mark.slow
def test_a_domain_at_the_limit_validates_and_evaluates_within_the_cap(project, run):
    """Age 0..999,999 with the census: the prefix cube (over 16 M entries) gives way to a scan,
    and both paths agree; under a 2 GB address-space cap nothing fails."""
    spec = project.spec(qis=(AT_LIMIT,) + DEFAULT_QIS[1:])
    result, _, rss = _capped("validate", spec, cwd=project.dir)
    assert result.returncode == 0, result.stderr
    assert 0 < rss < 1024
    assert "1,000,000 values" in result.stdout
    policy = "age:cuts=18,65,100|zip:top"
    risks = []
    for path in ("fast", "sql"):
        result, _, rss = _capped("evaluate", spec, "-p", policy, "--path", path, cwd=project.dir)
        assert result.returncode == 0, result.stderr
        risks.append(_risk(result.stdout))
        assert 0 < rss < 1024  # MB; measured ≈ 280 (fast) and ≈ 560 (sql)
    assert risks[0] == pytest.approx(risks[1])
    small = run("evaluate", project.spec(name="small.toml"), "-p", "age:cuts=18,65,100|zip:top").output
    assert _risk(small) == pytest.approx(risks[0])  # the same groups, the same risk
