"""Where deid-sql keeps files of its own: the user's cache folder (stdlib only).

The platform's usual place (what ``platformdirs.user_cache_dir`` gives, without the
dependency): ``$XDG_CACHE_HOME/deid-sql`` or ``~/.cache/deid-sql`` on Linux,
``~/Library/Caches/deid-sql`` on macOS, ``%LOCALAPPDATA%\\deid-sql\\Cache`` on Windows;
``DEID_SQL_CACHE_DIR`` overrides it.  The folder holds figures derived from the data (cells
are counts of quasi-identifier combinations), so it is created readable by its owner only.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ENV = "DEID_SQL_CACHE_DIR"


def cache_dir() -> Path:
    """The cache folder (not created)."""
    given = os.environ.get(ENV)
    if given:
        return Path(given).expanduser()
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "deid-sql" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "deid-sql"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache") / "deid-sql"


def private_folder(path: Path) -> Path:
    """``path`` created if missing (with its parents), readable by its owner only."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if sys.platform != "win32":
        os.chmod(path, 0o700)
    return path
