"""Atomic file writes: a temporary file renamed over the target, or nothing at all.

Without ``overwrite`` the target is created exclusively: the finished temporary file is hard-linked
to the target name, which fails if the name exists by then, so of two runs racing to the same new
file one lands and the other is refused (a plain rename would silently replace the first).

Temporaries are owner-only, since until the gate has judged them they hold rows nobody reviewed:
they live in a hidden folder ``.deid-sql-tmp/`` beside the target (created 0700, on the same file
system, so the final rename stays atomic; removed when empty), each created 0600 whatever the
umask (DuckDB, which creates its database and ``.wal`` itself, builds under umask 077), named
``NAME.PID-XXXX.tmp``.  The release paths judge the release query before creating any of them
(``output.write_query``), so a refused release never touches the disk.  The CLI turns SIGTERM into
an exception so ``finally`` blocks remove them; against ``kill -9`` each temporary is recorded in
the user's cache folder while it exists (``inflight``: pid, process start time, path), and the next
deid-sql command of any kind removes those of dead writers wherever they are (``inflight.sweep``);
the next write to the same target also removes its dead siblings (``clean_stale``).
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import OutputError
from . import inflight

#: the hidden folder beside a target that holds its temporaries
TMP_FOLDER = ".deid-sql-tmp"
_RECORDS: dict[Path, Path | None] = {}  # temporary → its record in the cache folder (``inflight``)


def _exists_error(path: Path) -> OutputError:
    return OutputError(f"output {path} already exists; pass --overwrite to replace it")


def temp_folder(path: Path) -> Path:
    """The owner-only folder for the temporaries of ``path``, created if missing; one that is not a
    folder of this user's (a link, a file, someone else's) is refused rather than written into."""
    folder = path.parent / TMP_FOLDER
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError:
        raise OutputError(f"output folder {path.parent} does not exist; create it first") from None
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or (hasattr(os, "geteuid") and info.st_uid != os.geteuid()):
        raise OutputError(f"{folder} (where deid-sql stages its temporary files) is not a folder of yours; "
                          f"remove it")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(folder, 0o700)
    return folder


def clean_stale(path: Path) -> list[Path]:
    """Remove the temporaries of ``path`` left by runs that were killed (their pid is no longer
    alive) — in the hidden folder, and siblings named the way earlier versions named them; return
    what was removed.  Another live run's temporaries are left alone."""
    name = re.escape(path.name)
    places = [(path.parent / TMP_FOLDER, re.compile(name + r"\.(\d+)-[^/]*\.(tmp|old)(\.wal)?$")),
              (path.parent, re.compile(r"\." + name + r"\.(\d+)-[^/]*\.(tmp|old)(\.wal)?$"))]
    removed: list[Path] = []
    for folder, pattern in places:
        try:
            found = list(folder.iterdir())
        except OSError:
            continue
        for candidate in found:
            m = pattern.match(candidate.name)
            if m and int(m.group(1)) != os.getpid() and not inflight.running(int(m.group(1)), None):
                try:
                    if candidate.is_dir() and not candidate.is_symlink():  # a staged folder (a set's release)
                        shutil.rmtree(candidate)
                    else:
                        candidate.unlink()
                    removed.append(candidate)
                except OSError:
                    pass
    return removed


def temporary_sibling(path: Path, suffix: str = ".tmp", create: bool = True) -> Path:
    """A new temporary for ``path`` in its hidden folder, named with this process's pid and recorded
    (``inflight``) until ``discard``; created empty with mode 0600 unless ``create`` is False
    (DuckDB wants to create its database file itself: build it under ``private_umask``)."""
    folder = temp_folder(path)
    while True:
        candidate = folder / f"{path.name}.{os.getpid()}-{secrets.token_hex(4)}{suffix}"
        entry = inflight.record(candidate)  # recorded first: a kill right after creating still finds it
        if not create:
            if candidate.exists() or candidate.with_name(candidate.name + ".wal").exists():
                inflight.forget(entry)
                continue
            _RECORDS[candidate] = entry
            return candidate
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            inflight.forget(entry)
            continue
        except FileNotFoundError:  # a run that finished removed the (empty) folder meanwhile
            inflight.forget(entry)
            folder = temp_folder(path)
            continue
        try:
            os.fchmod(fd, 0o600)  # whatever the umask
        finally:
            os.close(fd)
        _RECORDS[candidate] = entry
        return candidate


def discard(tmp: Path) -> None:
    """Remove a temporary (if still there: a placed one was renamed), its ``.wal``, its record, and
    the hidden folder if nothing else is in it."""
    if tmp.is_dir() and not tmp.is_symlink():  # a staged folder (``replacing_folder``)
        shutil.rmtree(tmp, ignore_errors=True)
    for p in (tmp, tmp.with_name(tmp.name + ".wal")):
        if not p.is_dir():
            p.unlink(missing_ok=True)
    inflight.forget(_RECORDS.pop(tmp, None))
    if tmp.parent.name == TMP_FOLDER:
        try:
            tmp.parent.rmdir()
        except OSError:  # another run's temporaries are in it
            pass


@contextmanager
def private_umask() -> Iterator[None]:
    """Umask 077 for a block where a library creates files itself (DuckDB's database and ``.wal``),
    so they are owner-only like every other temporary."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


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
        discard(tmp)


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
            discard(tmp)


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
            discard(old)
        raise
    for _, old in backups:
        discard(old)


@contextmanager
def replacing_folder(path: Path, overwrite: bool = False) -> Iterator[Path]:
    """``replacing`` for a folder of files that land together (a set of linked tables and their
    one sidecar): yield an empty owner-only folder staged in the hidden folder; on success it is
    renamed to ``path`` in one step, so readers see all of the set or none of it.  With
    ``overwrite`` an existing ``path`` is moved aside first and removed after; a kill between the
    two renames leaves no set at ``path``, and the next deid-sql command removes both temporaries
    (``inflight.sweep``)."""
    if path.exists() and not overwrite:
        raise _exists_error(path)
    if path.exists() and (not path.is_dir() or path.is_symlink()):
        raise OutputError(f"output {path} is not a folder; a set of tables is written to a folder: name a new one")
    if not path.parent.exists():
        raise OutputError(f"output folder {path.parent} does not exist; create it first")
    clean_stale(path)
    tmp = temporary_sibling(path, create=False)
    os.mkdir(tmp, 0o700)
    old: Path | None = None
    try:
        yield tmp
        for inner in tmp.iterdir():
            os.chmod(inner, 0o644)
        os.chmod(tmp, 0o755)
        if overwrite and path.exists():
            old = temporary_sibling(path, ".old", create=False)
            os.replace(path, old)
        try:
            os.rename(tmp, path)  # fails when another run created a non-empty folder there meanwhile
        except OSError:
            if old is not None:
                os.replace(old, path)
                old = None
            raise _exists_error(path) from None
    finally:
        discard(tmp)
        if old is not None:
            discard(old)
