"""The suite's markers (registered in pyproject.toml, ``--strict-markers``) and the guard that keeps
``engine`` honest.

- ``engine``: needs PostgreSQL or Spark (``tests/engines.py``). A fixture that opens engines takes
  its params from ``engine_params`` (``params=engine_params("duckdb", "postgres")``, or one engine),
  so its tests carry the mark for the PostgreSQL and Spark cases only and the DuckDB case stays in
  the fast suite; a test that opens one in its body is marked ``@pytest.mark.engine``, a module whose
  every test runs on one has ``pytestmark = pytest.mark.engine``.
- ``browser``: runs headless chromium (``tests/test_report_browser.py``).
- ``docs``: runs the examples of README.md and docs/*.md (``tests/test_docs.py``).
- ``slow``: a test that took 0.3 s or more (setup and call) in a run of the suite on the 2-core
  machine under load (``pytest --durations=0``), a parametrized one when half its cases did:
  hypothesis-heavy properties, the Adult data, big searches, the demo, subprocesses. That was the
  slowest fifth of the tests and 84 % of the time left without engines, browser and docs. Tests
  are marked, not modules: every module keeps at least its cheapest test in the fast suite (but
  ``test_hostile_property.py``, one 60-example property), and a few tests above the line stay fast
  because no fast test runs their code otherwise (the demo, the adversary's sensitivity sweep, a
  resumed frontier run, the drift and channel simulations). Mark a new test slow when
  ``--durations`` shows it above the line.

The fast suite (about 1.5 minutes on 2 cores, the whole suite 13 to 20)::

    pytest -m "not engine and not browser and not docs and not slow"

``require(marker, what)`` fails the running test when it does not carry ``marker``:
``tests.engines.open_engine`` calls it before opening PostgreSQL or Spark (available or not), so an
unmarked test that opens one fails wherever it runs. ``tests/test_markers.py`` checks the guard and
that the modules that run chromium or the docs' examples are marked.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

MARKERS = ("engine", "browser", "docs", "slow")
FAST = "not engine and not browser and not docs and not slow"

_running: list[pytest.Item] = []  # the test being run (setup, call, teardown), for require()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """Remember the running test while its fixtures are set up and it runs (a hook: conftest imports it)."""
    _running.append(item)
    try:
        return (yield)
    finally:
        _running.pop()


def require(marker: str, what: str) -> None:
    """Fail the running test if it is not marked ``marker`` (outside a test: nothing to check)."""
    if _running and _running[-1].get_closest_marker(marker) is None:
        pytest.fail(f"{_running[-1].nodeid} {what} but is not marked {marker!r}: add pytest.mark.{marker} to it, "
                    f"its module or its fixture's params (tests/markers.py)", pytrace=False)
