"""How a feature plugs in: named entries, registered by the feature, loaded when first used.

One pattern for every extension point — engines, spec sections, risk models and the command
line's commands.  A ``Registry`` maps a name to an ``Entry``: the ``"module:attribute"`` that
implements it and a few plain facts about it (``info``) that can be read without importing the
implementation (a section's keys, an engine's extra, a command's one-line summary).  Loading an
entry imports its module then and only then.

Features register themselves.  Each package of ``deid_sql`` that adds to a registry has a
``plugin.py`` that calls ``add`` on the registries it fills; ``discover`` imports every such
module it finds beside this file (one directory listing, the first time a registry is read).  So
the core — ``spec``, ``problem``, ``evaluate`` — reads the registries and names no feature, and a
new feature is a package with a ``plugin.py``, not an edit to the core.  The command line's own
``COMMANDS`` are added by ``deid_sql.cli.main`` (the CLI is the top of the stack; its table is
read without importing the library).  Stdlib only.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

PLUGIN_MODULE = "plugin"  # the module name a package registers itself from
_discovered = False


@dataclass(frozen=True)
class Entry:
    """One registered name: where its implementation lives and what can be known without it."""

    name: str
    target: str  # "package.module:attribute"
    info: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def load(self) -> Any:
        """The implementation (its module imported now)."""
        module, _, attribute = self.target.partition(":")
        return getattr(importlib.import_module(module), attribute)

    def __getitem__(self, key: str) -> Any:
        return self.info[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.info.get(key, default)


class Registry:
    """Named entries of one kind (``kind`` names it in messages), in the order they were added.

    ``discovered`` registries are filled by the packages' ``plugin`` modules, imported on first
    read; the command table is filled by its owner and needs no discovery."""

    def __init__(self, kind: str, discovered: bool = True) -> None:
        self.kind = kind
        self._discovered = discovered
        self._entries: dict[str, Entry] = {}

    def add(self, name: str, target: str, **info: Any) -> Entry:
        """Register ``name``; adding the same name twice with another target is a bug."""
        old = self._entries.get(name)
        if old is not None and old.target != target:
            raise ValueError(f"{self.kind} {name!r} is registered twice: {old.target} and {target}")
        entry = Entry(name, target, MappingProxyType(dict(info)))
        self._entries[name] = entry
        return entry

    def _ready(self) -> dict[str, Entry]:
        if self._discovered:
            discover()
        return self._entries

    def __contains__(self, name: object) -> bool:
        return name in self._ready()

    def __iter__(self) -> Iterator[Entry]:
        return iter(tuple(self._ready().values()))

    def names(self) -> tuple[str, ...]:
        return tuple(self._ready())

    def entry(self, name: str) -> Entry:
        """The entry of ``name``; an unknown name raises ``KeyError`` with the known ones."""
        entries = self._ready()
        if name not in entries:
            raise KeyError(self.unknown(name))
        return entries[name]

    def load(self, name: str) -> Any:
        return self.entry(name).load()

    def unknown(self, name: object) -> str:
        """``unknown engine 'x'; the engines are: duckdb, postgres, spark`` — for error lines."""
        return f"unknown {self.kind} {name!r}; the {self.kind}s are: {', '.join(self._ready())}"


#: the engines behind ``Backend``: name → backend class; info ``module`` and ``extra`` (the Python
#: package an engine needs and the pip extra that installs it; none for a built-in engine)
ENGINES = Registry("engine")
#: the spec's feature sections: name → parser ``(data, SectionContext, Problems) -> value``; info
#: ``keys`` (the top-level keys it owns) and ``replaces_qis`` (a spec with it needs no [[qi]])
SECTIONS = Registry("spec section")
#: record-risk models: name → factory ``(spec, population_total, records) -> RecordRisk``; info
#: ``census`` (True: needs population counts or a population; False: estimates from the sample)
RISK_MODELS = Registry("risk model")
#: the command line's commands: name → click command; info ``summary`` (its one line in --help)
COMMANDS = Registry("command", discovered=False)


def plugin_modules() -> list[str]:
    """The ``plugin`` modules of this package's subpackages, by name (one directory listing)."""
    root = Path(__file__).resolve().parent
    package = __name__.rpartition(".")[0]
    return [f"{package}.{path.parent.name}.{PLUGIN_MODULE}"
            for path in sorted(root.glob(f"*/{PLUGIN_MODULE}.py"))]


def discover() -> None:
    """Import every package's ``plugin`` module once, so the registries hold every feature."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    try:
        for module in plugin_modules():
            importlib.import_module(module)
    except BaseException:
        _discovered = False
        raise


__all__ = ["COMMANDS", "ENGINES", "RISK_MODELS", "SECTIONS", "Entry", "Registry", "discover", "plugin_modules"]
