"""Atomic file writes: a temporary sibling renamed over the target, or nothing at all."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import OutputError


@contextmanager
def replacing(path: Path, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path``, on any
    error it is removed, so readers never see a half-written file."""
    if path.exists() and not overwrite:
        raise OutputError(f"output {path} already exists; pass --overwrite to replace it")
    if not path.parent.exists():
        raise OutputError(f"output folder {path.parent} does not exist; create it first")
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
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
            raise OutputError(f"output {path} already exists; pass --overwrite to replace it")
        if not path.parent.exists():
            raise OutputError(f"output folder {path.parent} does not exist; create it first")
    tmps: list[Path] = []
    try:
        for path in paths:
            fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            os.close(fd)
            tmps.append(Path(name))
        yield tmps
        _swap_in(paths, tmps)
    finally:
        for tmp in tmps:
            tmp.unlink(missing_ok=True)


def _swap_in(paths: list[Path], tmps: list[Path]) -> None:
    backups: list[tuple[Path, Path]] = []
    placed: list[Path] = []
    try:
        for path, tmp in zip(paths, tmps):
            if path.exists():
                fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent)
                os.close(fd)
                os.replace(path, name)
                backups.append((path, Path(name)))
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
            placed.append(path)
    except BaseException:
        for path in placed:
            path.unlink(missing_ok=True)
        for path, old in backups:
            os.replace(old, path)
        raise
    for _, old in backups:
        old.unlink(missing_ok=True)
