"""The dbt project folder: where files go, what is in the way, and writing all or nothing."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from ..errors import OutputError
from ..storage.atomic import replacing
from .files import Source


def project_paths(project_file: Path) -> tuple[str, str]:
    """The first model path and macro path of an existing project (default models, macros)."""
    try:
        import yaml
    except ImportError:  # writing needs no dbt; without PyYAML assume the defaults
        return "models", "macros"
    try:
        data = yaml.safe_load(project_file.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise OutputError(f"cannot read {project_file}: {str(e).splitlines()[0]}") from None
    found = []
    for key, default in (("model-paths", "models"), ("macro-paths", "macros")):
        paths = data.get(key) if isinstance(data, dict) else None
        found.append(str(paths[0]).strip("/") if isinstance(paths, list) and paths else default)
    return found[0], found[1]


def declared_source(root: Path, models_dir: str, source: Source, own: str) -> str | None:
    """The yml (relative to the project) in which the user already declares the source table,
    so that it is not declared twice; None when none does (or PyYAML is not installed)."""
    folder = root / models_dir
    try:
        import yaml
    except ImportError:
        return None
    if not folder.is_dir():
        return None
    for path in sorted([*folder.rglob("*.yml"), *folder.rglob("*.yaml")]):
        rel = str(path.relative_to(root))
        if rel == own:
            continue
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue  # dbt will say what is wrong with it
        sources = data.get("sources") if isinstance(data, dict) else None
        for entry in sources if isinstance(sources, list) else []:
            if not isinstance(entry, dict) or entry.get("name") != source.name:
                continue
            tables = entry.get("tables")
            if any(isinstance(t, dict) and t.get("name") == source.table for t in tables or []):
                return rel
    return None


def check_targets(root: Path, shown: Path, files: dict[str, str], shared: set[str], models_dir: str, model: str,
                  overwrite: bool) -> list[str]:
    """Refuse before writing anything: a file in the way, a model of that name elsewhere, files
    of an earlier run (without ``overwrite``).  Returns the shared files that already hold the
    same text (left alone)."""
    if root.exists() and not root.is_dir():
        raise OutputError(f"--project {shown} is a file; give the dbt project folder")
    if not root.exists() and not root.parent.is_dir():
        raise OutputError(f"folder {root.parent} does not exist; create it first")
    own = {f"{models_dir}/{model}.sql"}
    others = sorted(str(p.relative_to(root)) for ext in ("sql", "py")
                    for p in (root / models_dir).rglob(f"{model}.{ext}")) if (root / models_dir).is_dir() else []
    others = [p for p in others if p not in own]
    if others:
        raise OutputError(f"the project already has a model named {model} ({others[0]}); choose another --model")
    taken, unchanged = [], []
    for rel, text in files.items():
        path = root / rel
        if path.is_dir():
            raise OutputError(f"{path} is a folder; cannot write the file {rel} there")
        if not path.exists():
            continue
        if rel in shared and path.read_bytes() == text.encode("utf-8"):
            unchanged.append(rel)
        elif not overwrite:
            taken.append(rel)
    if taken:
        raise OutputError(f"{', '.join(taken)} already exist in {shown}; pass --overwrite to replace them")
    return unchanged


def write_all(root: Path, files: dict[str, str], overwrite: bool) -> None:
    """Write every file to a temporary sibling, then rename them together; on failure remove
    the temporaries and the folders this call created."""
    made: list[Path] = []
    try:
        for folder in sorted({(root / rel).parent for rel in files}, key=lambda p: len(p.parts)):
            missing = []
            while folder != root.parent and not folder.exists():
                missing.append(folder)
                folder = folder.parent
            for path in reversed(missing):
                path.mkdir()
                made.append(path)
        with ExitStack() as stack:
            for rel, text in files.items():
                stack.enter_context(replacing(root / rel, overwrite)).write_text(text, encoding="utf-8")
    except BaseException:
        for folder in reversed(made):
            try:
                folder.rmdir()
            except OSError:
                pass
        raise
