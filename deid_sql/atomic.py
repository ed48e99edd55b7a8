"""Atomic file writes: a temporary sibling renamed over the target, or nothing at all.

Without ``overwrite`` the target is created exclusively: the finished temporary file is hard-linked
to the target name, which fails if the name exists by then, so of two runs racing to the same new
file one lands and the other is refused (a plain rename would silently replace the first).

Temporaries are hidden siblings ``.NAME.PID-XXXX.tmp`` (DuckDB may add ``.wal``): the CLI turns
SIGTERM into an exception so ``finally`` blocks remove them, and a run that was killed outright
(``kill -9``) leaves them for the next run writing the same target, which removes those whose
process is gone (``clean_stale``).
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import OutputError


def _exists_error(path: Path) -> OutputError:
    return OutputError(f"output {path} already exists; pass --overwrite to replace it")


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def clean_stale(path: Path) -> list[Path]:
    """Remove the temporaries of ``path`` left by runs that were killed (their pid is no longer
    alive); return what was removed.  Another live run's temporaries are left alone."""
    pattern = re.compile(r"\." + re.escape(path.name) + r"\.(\d+)-[^/]*\.(tmp|old)(\.wal)?$")
    removed: list[Path] = []
    try:
        siblings = list(path.parent.iterdir())
    except OSError:
        return removed
    for sibling in siblings:
        m = pattern.match(sibling.name)
        if m and int(m.group(1)) != os.getpid() and not _pid_alive(int(m.group(1))):
            try:
                sibling.unlink()
                removed.append(sibling)
            except OSError:
                pass
    return removed


def temporary_sibling(path: Path, suffix: str = ".tmp", create: bool = True) -> Path:
    """A new hidden sibling of ``path`` named with this process's pid (``clean_stale``); created
    empty unless ``create`` is False (DuckDB wants to create its database file itself)."""
    if create:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}-", suffix=suffix, dir=path.parent)
        os.close(fd)
        return Path(name)
    while True:
        candidate = path.parent / f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}{suffix}"
        if not candidate.exists():
            return candidate


def place(tmp: Path, path: Path, overwrite: bool) -> None:
    """Move the finished ``tmp`` to ``path``: replacing it with ``overwrite``, else only if ``path``
    does not exist at this instant (a hard link, atomic; ``OutputError`` if it exists)."""
    os.chmod(tmp, 0o644)
    if overwrite:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise _exists_error(path) from None
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        # a file system without hard links: the best we can do is check just before the rename
        if path.exists():
            raise _exists_error(path) from None
        os.replace(tmp, path)
        return
    tmp.unlink()


@contextmanager
def replacing(path: Path, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path`` (without
    ``overwrite``: becomes ``path`` only if no other run created it meanwhile), on any
    error it is removed, so readers never see a half-written file."""
    if path.exists() and not overwrite:
        raise _exists_error(path)
    if not path.parent.exists():
        raise OutputError(f"output folder {path.parent} does not exist; create it first")
    clean_stale(path)
    tmp = temporary_sibling(path)
    try:
        yield tmp
        place(tmp, path, overwrite)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: Path, text: str, overwrite: bool = False) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with replacing(path, overwrite) as tmp:
        tmp.write_text(text, encoding="utf-8")


@contextmanager
def replacing_together(paths: list[Path], overwrite: bool = False) -> Iterator[list[Path]]:
    """``replacing`` for several files that must land together (a release and its sidecar):
    yield one temporary sibling each; on success all replace their targets, else none does.
    Targets being overwritten are moved aside first and put back if a later rename fails."""
    for path in paths:
        if path.exists() and not overwrite:
            raise _exists_error(path)
        if not path.parent.exists():
            raise OutputError(f"output folder {path.parent} does not exist; create it first")
    tmps: list[Path] = []
    try:
        for path in paths:
            clean_stale(path)
            tmps.append(temporary_sibling(path))
        yield tmps
        _swap_in(paths, tmps, overwrite)
    finally:
        for tmp in tmps:
            tmp.unlink(missing_ok=True)


def _swap_in(paths: list[Path], tmps: list[Path], overwrite: bool = True) -> None:
    backups: list[tuple[Path, Path]] = []
    placed: list[Path] = []
    try:
        for path, tmp in zip(paths, tmps):
            if overwrite and path.exists():
                old = temporary_sibling(path, ".old")
                os.replace(path, old)
                backups.append((path, old))
            place(tmp, path, overwrite)
            placed.append(path)
    except BaseException:
        for path in placed:
            path.unlink(missing_ok=True)
        for path, old in backups:
            os.replace(old, path)
        raise
    for _, old in backups:
        old.unlink(missing_ok=True)
