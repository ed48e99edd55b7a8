"""Skips that are failures under CI (``CI`` set, as ``.ci/run`` does).

The shared Adult data set and the test extra's modules (``pytest.importorskip``) must be there,
so a green CI run ran those tests.  A plugin of its own, importing nothing of deid_sql, so that
``tests/test_ci_skips.py`` can load it into a pytest run outside the repository (where the
installed package, not the repository's folder, is imported).
"""

from __future__ import annotations

import os
import re

import pytest

CI_MUST_NOT_SKIP = re.compile(r"adult|could not import", re.IGNORECASE)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Under CI, turn a skip for missing Adult data or a missing test dependency into a failure."""
    outcome = yield
    report = outcome.get_result()
    if not (os.environ.get("CI") and report.skipped and isinstance(report.longrepr, tuple)):
        return
    reason = str(report.longrepr[2])
    if CI_MUST_NOT_SKIP.search(reason):
        report.outcome = "failed"
        report.longrepr = f"skipped under CI, where it must run: {reason}"
