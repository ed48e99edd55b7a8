"""Signals that stop a run — Ctrl-C (SIGINT), SIGTERM, SIGHUP — reported as such wherever they land.

Python runs a signal's handler in the main thread, between two bytecodes.  During a query the main
thread is inside the engine's driver (DuckDB's C++), which sees the handler only when the query has
run to its end — minutes on a large table — and then turns the handler's exception into an error
of its own ("Query interrupted"), which reached the user as an internal error, exit 3.  So:

- ``install`` (the command line's ``main``) sets the handlers.  Each records the signal
  (``received``) and raises as before: ``KeyboardInterrupt`` for SIGINT, ``Terminated`` (a
  ``SystemExit`` with code 128 + signum) for SIGTERM and SIGHUP, so the ``finally`` blocks of the
  writes run and remove what they staged (``atomic``, the engines' staging);
- a watcher thread, woken through ``signal.set_wakeup_fd`` the moment a signal arrives whatever the
  main thread is doing, records it and cancels the engines' running queries: every open engine
  connection registers how to cancel it (``on_signal``; DuckDB's ``interrupt``, psycopg's
  ``cancel``), so the query stops at once and the driver raises;
- the error boundary (``cli/failures.py``) turns whatever exception then reaches it — the handler's,
  the driver's, a ``BackendError`` wrapping the driver's — into one line and exit 128 + signum (130
  for Ctrl-C, 143 for SIGTERM), never an internal error.

Cancelling a connection that runs nothing is harmless: its next query runs as usual (the cleanup
of a staged table, for one).  Standard library only: the engines import it.
"""

from __future__ import annotations

import itertools
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))

_received: int | None = None
_cancels: dict[int, Callable[[], object]] = {}
_tokens = itertools.count()
_lock = threading.Lock()
_installed = False
_wakeup: tuple[socket.socket, socket.socket] | None = None  # kept open for the process's life


class Terminated(SystemExit):
    """SIGTERM or SIGHUP as an exception, like Ctrl-C's ``KeyboardInterrupt``: exit code 128 + signum."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


def received() -> int | None:
    """The first signal of ``SIGNALS`` this process received since ``install`` (or ``reset``), or None."""
    return _received


def reset() -> None:
    """Forget the signal received (a test that simulates one)."""
    global _received
    _received = None


def words(signum: int) -> str:
    """What the one line says of a run stopped by ``signum``."""
    if signum == getattr(signal, "SIGINT", None):
        return "interrupted"
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    return f"terminated by {name}"


def on_signal(cancel: Callable[[], object]) -> int:
    """Call ``cancel`` (from the watcher thread) when a signal arrives, until ``forget``: an engine
    connection's way to stop its running query.  Returns the registration's token."""
    token = next(_tokens)
    with _lock:
        _cancels[token] = cancel
    return token


def forget(token: int) -> None:
    with _lock:
        _cancels.pop(token, None)


@contextmanager
def cancelling(cancel: Callable[[], object]) -> Iterator[None]:
    """``on_signal(cancel)`` for the duration of the block (a connection opened for one write)."""
    token = on_signal(cancel)
    try:
        yield
    finally:
        forget(token)


def install() -> None:
    """Handle ``SIGNALS`` as described above; from the main thread, once (later calls do nothing)."""
    global _installed, _wakeup
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    for signum in SIGNALS:
        signal.signal(signum, _handler)
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    try:
        signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    except (ValueError, OSError):  # the fd cannot serve as a wakeup fd here: the handlers still record
        reader.close()
        writer.close()
    else:
        _wakeup = (reader, writer)
        threading.Thread(target=_watch, args=(reader,), name="deid-sql-signals", daemon=True).start()
    _installed = True


def _note(signum: int) -> None:
    global _received
    if _received is None and signum in SIGNALS:
        _received = signum


def _handler(signum: int, frame: object) -> None:
    """The main thread's handler: record, then raise (``KeyboardInterrupt`` or ``Terminated``)."""
    _note(signum)
    if signum == getattr(signal, "SIGINT", None):
        raise KeyboardInterrupt
    raise Terminated(signum)


def _watch(reader: socket.socket) -> None:
    """The watcher thread: each byte on the wakeup socket is a signal's number; record it and cancel
    every registered query."""
    while True:
        try:
            data = reader.recv(64)
        except OSError:
            return
        if not data:
            return
        ours = [signum for signum in data if signum in SIGNALS]
        if not ours:
            continue
        for signum in ours:
            _note(signum)
        with _lock:
            cancels = list(_cancels.values())
        for cancel in cancels:
            try:
                cancel()
            except Exception:  # a connection closed meanwhile: nothing left to cancel
                pass


__all__ = ["SIGNALS", "Terminated", "cancelling", "forget", "install", "on_signal", "received", "reset", "words"]
