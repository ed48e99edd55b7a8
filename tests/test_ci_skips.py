"""Under CI (``CI`` set, as ``.ci/run`` does) a test that skips for missing Adult data or a missing
test dependency fails, like an absent engine (tests/engines.py); other skips stay skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = '''
import pytest

@pytest.mark.skipif(True, reason="shared Adult data absent")
def test_adult_mark(): pass

def test_adult_call(): pytest.skip("Adult data not available at somewhere")

def test_missing_module(): pytest.importorskip("no_such_module_for_deid_sql")

def test_other_reason(): pytest.skip("no census")
'''


def outcomes(tmp_path: Path, ci: bool) -> str:
    (tmp_path / "test_skips.py").write_text(TESTS, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "CI"} | ({"CI": "true"} if ci else {})
    env["PYTHONPATH"] = str(ROOT)  # for ``tests.ci_skips``, which imports nothing of deid_sql
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "tests.ci_skips", "-p", "no:cacheprovider",
                          str(tmp_path / "test_skips.py")], capture_output=True, text=True, cwd=tmp_path, env=env)
    return run.stdout


@pytest.mark.parametrize("ci", [False, True])
def test_adult_and_dependency_skips_fail_under_ci(tmp_path: Path, ci: bool) -> None:
    out = outcomes(tmp_path, ci)
    if ci:
        assert "1 skipped" in out and "2 failed" in out and "1 error" in out, out  # a mark skips in setup
        assert "skipped under CI, where it must run" in out
    else:
        assert "4 skipped" in out and "failed" not in out, out
