"""Progress lines on stderr for the jobs that can take seconds (loads, writes, searches).

Why a module of our own rather than a dependency: click (already required) draws bars but
cannot poll a database engine, and the line needs three properties that are easy to get
wrong: it is **quiet when stderr is not a terminal** (pipes, CI logs, files and the tests see
nothing), it **appears only after a delay** (a job that ends in under a second draws nothing,
so fast commands stay clean), and it **erases itself** when the job ends, so the command's
own output is what remains on the screen.

Two shapes:

- :func:`watching` polls a function for the fraction done (an engine's progress of its running
  query, see ``Backend.progress``) from a background thread; when the engine cannot tell, the
  line shows the elapsed time only.
- :func:`counting` is advanced by the job itself (a search counting evaluated policies).

``DEID_SQL_PROGRESS=0`` turns every line off, ``=1`` forces them on (for a terminal that does not
say it is one).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

DELAY = 1.0
"""Seconds a job runs before its line appears (shorter jobs draw nothing)."""

INTERVAL = 0.2
"""Seconds between two redraws."""

WIDTH = 24
"""Characters of the bar itself."""


def enabled(stream: TextIO | None = None) -> bool:
    """Whether progress lines are drawn on ``stream`` (default stderr): a terminal, unless the
    environment variable ``DEID_SQL_PROGRESS`` says ``0`` (never) or ``1`` (always)."""
    forced = os.environ.get("DEID_SQL_PROGRESS", "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or odd stream
        return False


Probe = Callable[[], "float | str | None"]
"""What a job reports when asked: the fraction done (0..1), a short status text when no fraction
means anything (a search that stops early: "1,238 checked"), or None (unknown)."""


def line(label: str, fraction: float | str | None, elapsed: float) -> str:
    """The text of one progress line: ``label [######......]  42%  3.1 s``; with a status text
    ``label … 1,238 checked  3.1 s``; unknown: ``label …  3.1 s``."""
    if fraction is None:
        return f"{label} …  {elapsed:.1f} s"
    if isinstance(fraction, str):
        return f"{label} … {fraction}  {elapsed:.1f} s"
    fraction = min(max(fraction, 0.0), 1.0)
    filled = int(round(fraction * WIDTH))
    return f"{label} [{'#' * filled}{'.' * (WIDTH - filled)}] {fraction * 100:3.0f}%  {elapsed:.1f} s"


class _Line:
    """The line on the terminal: drawn in place with a carriage return, erased at the end."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.width = 0

    def draw(self, text: str) -> None:
        pad = max(self.width - len(text), 0)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self.width = len(text)

    def erase(self) -> None:
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


class _Drawer:
    """A background thread redrawing the line from ``fraction()`` until stopped."""

    def __init__(self, label: str, fraction: Probe, stream: TextIO,
                 delay: float, interval: float) -> None:
        self.label, self.fraction, self.delay, self.interval = label, fraction, delay, interval
        self.out = _Line(stream)
        self.stop = threading.Event()
        self.start = time.monotonic()
        self.thread = threading.Thread(target=self._run, name="deid-sql progress", daemon=True)

    def _run(self) -> None:
        if self.stop.wait(self.delay):
            return
        while not self.stop.is_set():
            try:
                done: float | str | None = self.fraction()
            except Exception:  # noqa: BLE001 - a progress probe must never break the job it watches
                done = None
            self.out.draw(line(self.label, done, time.monotonic() - self.start))
            self.stop.wait(self.interval)

    def __enter__(self) -> _Drawer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.out.erase()


@contextmanager
def watching(label: str, fraction: Probe | None = None, stream: TextIO | None = None,
             delay: float | None = None, interval: float | None = None) -> Iterator[None]:
    """Show ``label`` with what ``fraction()`` returns (see :data:`Probe`) while the ``with`` block
    runs; nothing when progress is not :func:`enabled`."""
    stream = stream if stream is not None else sys.stderr
    if not enabled(stream):
        yield
        return
    delay = DELAY if delay is None else delay
    interval = INTERVAL if interval is None else interval
    with _Drawer(label, fraction or (lambda: None), stream, delay, interval):
        yield


class Counter:
    """Work counted by the job itself: ``advance()`` as units finish.  With a ``total`` the line
    shows the fraction; without one, the count and ``unit`` ("1,238 checked")."""

    def __init__(self, total: int | None = None, unit: str = "done") -> None:
        self.total = total
        self.unit = unit
        self.done = 0

    def advance(self, units: int = 1) -> None:
        self.done += units

    def fraction(self) -> float | str:
        if not self.total:
            return f"{self.done:,} {self.unit}"
        return self.done / self.total


@contextmanager
def counting(label: str, total: int | None = None, stream: TextIO | None = None,
             delay: float | None = None, interval: float | None = None, unit: str = "done") -> Iterator[Counter]:
    """A :class:`Counter` drawn as with :func:`watching`."""
    counter = Counter(total, unit)
    with watching(label, counter.fraction, stream, delay, interval):
        yield counter
