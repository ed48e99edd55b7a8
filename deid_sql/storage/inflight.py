"""Temporary files in flight, recorded so that the next deid-sql command removes those of a killed run.

A write stages its rows in a temporary file (``atomic``); ``kill -9`` or a power cut leaves it
behind, holding de-identified — or, for a run killed before its gate said no, merely staged —
rows.  Each temporary is therefore recorded in the user's cache folder (``userdirs``) while it
exists: one small file per temporary in ``inflight/``, named with the writer's pid and the start
time of that process (``/proc/<pid>/stat``, so a later process that reuses the pid is not taken
for the writer), holding the temporary's path.  ``sweep`` (run by every ``deid-sql`` command
before it parses its options) removes every recorded temporary whose writer is gone, in any
folder, and says so on stderr in one line.

Stdlib only, and nothing is read unless records exist: the sweep costs one ``scandir`` of an
empty folder, so ``deid-sql --help`` stays instant.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
from pathlib import Path

from .userdirs import cache_dir, private_folder

#: the folder of the records, inside the cache folder
FOLDER = "inflight"
_SELF_START: list[str | None] = []  # this process's start time, read once


def registry() -> Path:
    """Where the records are (not created)."""
    return cache_dir() / FOLDER


def _stat(pid: int) -> tuple[str, str] | None:
    """(state, start time in clock ticks since boot) of process ``pid`` from ``/proc``; None when
    there is no such process or no ``/proc`` to ask."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()  # after "pid (comm) ": the comm may hold spaces
    if len(fields) < 20:
        return None
    return fields[0], fields[19]  # field 3 (state) and field 22 (starttime) of proc(5)


def start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (None without ``/proc``, or no such process)."""
    found = _stat(pid)
    return found[1] if found else None


def _own_start() -> str | None:
    if not _SELF_START:
        _SELF_START.append(start_time(os.getpid()))
    return _SELF_START[0]


def running(pid: int, start: str | None) -> bool:
    """Whether the writer that recorded (``pid``, ``start``) still runs: the pid exists, is no
    zombie, and (when both are known) started at ``start`` — a reused pid started later."""
    if pid <= 0:
        return True
    found = _stat(pid)
    if found is not None:
        state, now = found
        return state != "Z" and (start is None or now == start)
    if Path("/proc/self/stat").exists():  # /proc is there and has no such process
        return False
    try:  # no /proc (macOS): the pid alone, as well as it can be known
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def record(path: Path) -> Path | None:
    """Record temporary ``path`` (absolute) as this process's; returns the record to ``forget``, or
    None when the cache folder cannot be written (the write goes on: ``atomic.clean_stale`` still
    removes the leftover on the next write to the same target)."""
    start = _own_start() or "-"
    try:
        folder = private_folder(registry())
        entry = folder / f"{os.getpid()}.{start}.{secrets.token_hex(6)}.path"
        fd = os.open(entry, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, os.fsencode(str(path.absolute())))  # one write: a kill cannot tear it
        finally:
            os.close(fd)
    except OSError:
        return None
    return entry


def forget(entry: Path | None) -> None:
    """Drop a record once its temporary is gone (renamed into place or removed)."""
    if entry is not None:
        try:
            entry.unlink()
        except OSError:
            pass


def _leftovers(path: Path) -> list[Path]:
    """The temporary and what DuckDB adds beside it."""
    return [path, path.with_name(path.name + ".wal")]


def sweep() -> list[Path]:
    """Remove every recorded temporary whose writer is gone, and its record; return the files
    removed.  Records of live writers (another deid-sql still writing) are left alone."""
    try:
        entries = list(os.scandir(registry()))
    except OSError:
        return []
    removed: list[Path] = []
    for entry in entries:
        parts = entry.name.split(".")
        if len(parts) != 4 or parts[3] != "path" or not parts[0].isdigit():
            continue
        pid, start = int(parts[0]), (None if parts[1] == "-" else parts[1])
        if pid == os.getpid() or running(pid, start):
            continue
        try:
            target = Path(os.fsdecode(Path(entry.path).read_bytes()))
        except OSError:
            continue
        if str(target):
            for leftover in _leftovers(target):
                try:
                    if leftover.is_dir() and not leftover.is_symlink():  # a staged folder of a set's release
                        shutil.rmtree(leftover)
                    else:
                        leftover.unlink()
                    removed.append(leftover)
                except FileNotFoundError:
                    pass
                except OSError:
                    continue
            _remove_empty(target.parent)
        forget(Path(entry.path))
    return removed


def _remove_empty(folder: Path) -> None:
    """Remove a hidden temporary folder once nothing is left in it (another run may still use it:
    then it is not empty, and stays)."""
    try:
        folder.rmdir()
    except OSError:
        pass


def announce() -> None:
    """``sweep``, saying what it removed in one line on stderr (the CLI runs this first); never fails."""
    try:
        removed = sweep()
    except Exception:  # noqa: BLE001 - tidying must never stop the command the user asked for
        return
    if removed:
        files = "file" if len(removed) == 1 else "files"
        sys.stderr.write(f"removed {len(removed)} leftover temporary {files} of an interrupted deid-sql run: "
                         f"{', '.join(str(p) for p in removed)}\n")
