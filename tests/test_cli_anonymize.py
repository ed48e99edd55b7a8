"""deid-sql anonymize: optimum found, output k-anonymous by an independent count, bad input."""

from __future__ import annotations

import collections

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from deid_sql.cli import cli

from .test_fulldomain import ADULT_ATTRIBUTES, adult_spec, small_spec


def _run(*args: object, expect: int = 0):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == expect, (result.stdout, result.stderr, result.exception)
    return result


@pytest.mark.parametrize("k,limit", [(3, 0.0), (10, 0.05)])
def test_output_is_k_anonymous_and_within_the_limit(tmp_path, k, limit):
    spec = small_spec(tmp_path, release=f"min_k = {k}")  # the gate judges the release by the same k
    out = tmp_path / "release.parquet"
    result = _run("anonymize", spec, "--min-k", k, "--max-suppressed-share", limit, "--out", out, "--store-stats")
    assert "optimum" in result.stdout and "insufficient protection" in result.stdout
    rows = pq.read_table(out).to_pylist()
    qis = ["age", "sex", "race", "zip"]
    kept = [r for r in rows if not r["deid_suppressed"]]
    suppressed = [r for r in rows if r["deid_suppressed"]]
    counts = collections.Counter(tuple(r[q] for q in qis) for r in kept)
    assert min(counts.values()) >= k
    assert len(suppressed) <= int(limit * len(rows))
    assert all(r[q] == "*" for r in suppressed for q in qis)
    source = pq.read_table(tmp_path / "source.parquet").to_pylist()
    assert len(rows) == len(source) and [r["dx"] for r in rows] == [r["dx"] for r in source]


@pytest.mark.slow
def test_adult_nine_attributes(tmp_path):
    spec = adult_spec(tmp_path, release="min_k = 5")
    out = tmp_path / "adult.parquet"
    result = _run("anonymize", spec, "--min-k", 5, "--max-suppressed-share", 0.04, "--out", out)
    assert "of 12,960 transformations" in result.stdout
    rows = pq.read_table(out).to_pylist()
    kept = [r for r in rows if not r["deid_suppressed"]]
    counts = collections.Counter(tuple(r[q] for q in ADULT_ATTRIBUTES) for r in kept)
    assert min(counts.values()) >= 5 and len(rows) - len(kept) <= int(0.04 * len(rows))


def test_time_limit_and_metrics(tmp_path):
    spec = small_spec(tmp_path)
    for metric in ("loss", "nue", "dm", "kl"):
        assert "optimum" in _run("anonymize", spec, "--min-k", 2, "--metric", metric).stdout
    assert "time limit reached" in _run("anonymize", spec, "--min-k", 2, "--time-limit", 0).stdout


@pytest.mark.parametrize("args,message", [
    (["--min-k", 0], "k = 0 must be at least 1"),
    (["--min-k", 100000], "k"),
    (["--min-k", 2, "--max-suppressed-share", 1.5], "--max-suppressed-share"),
    (["--min-l", 2, "--sensitive", "age"], "QI"),
    (["--min-l", 2], "--sensitive"),
    (["--max-mean-record-risk", 0], "--max-mean-record-risk"),
    ([], "give a privacy model"),
])
def test_bad_input(tmp_path, args, message):
    result = _run("anonymize", small_spec(tmp_path), *args, expect=2)
    assert message in result.stderr and "Traceback" not in result.stderr
