"""The ``[channels]`` table of a spec: channel expansion (seed 003) declared in TOML.

Everything that can be checked without data is checked here, every problem
collected; checks that need the data (u_k >= P(v^k), the "none" value present,
NULLs) happen when the source is read (``inputs.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import Problems
from ..spec.sections import SectionContext

CHANNEL_KEYS = {"related", "confidential", "none", "identity", "thresholds", "b", "weights", "nulls",
                "null_label", "confidential_nulls", "candidates", "max_size", "seed", "outputs", "integer",
                "time_limit", "label_column"}
INTEGER_MODES = ("auto", "always", "never")


@dataclass(frozen=True)
class ChannelSpec:
    """What to protect, how strictly, and what to release.

    ``related`` columns define input channels; ``confidential`` holds v^0…v^K with
    ``none`` as v^0; ``thresholds`` are the u_k of eq. 3 (missing ones default to
    P(v^k), eq. 2); ``b`` and ``weights`` (c_k, default 1) switch on eq. 4.
    """

    related: tuple[str, ...]
    confidential: str
    none: str
    identity: tuple[str, ...]
    thresholds: dict[str, float] = field(default_factory=dict)
    b: float | None = None
    weights: dict[str, float] = field(default_factory=dict)
    nulls: str = "error"  # NULL in a related column: "error" or "category"
    null_label: str = "NULL"
    confidential_nulls: str = "error"  # NULL confidential value: "error" or "none" (read as v^0)
    candidates: int | str | None = None  # output channels incl. the all-channel one; None: up to 2,048; "all"
    max_size: int = 8  # input channels per generated output channel (§7 rule 2)
    seed: int = 0
    outputs: tuple[tuple[tuple[str, ...], ...], ...] = ()  # user-listed output channels
    integer: str = "auto"  # whole subjects from a MILP: "auto", "always" or "never"
    time_limit: float = 10.0  # seconds for the MILP before falling back to LP + rounding
    label_column: str = "output_channel"


def parse_section(data: Mapping[str, Any], context: SectionContext, problems: Problems) -> ChannelSpec | None:
    """The spec's ``[channels]`` (registered in ``channels/plugin.py``); its identity columns are
    checked against the ``[columns]`` roles the core parsed first."""
    if "channels" not in data:
        return None
    channels = parse_channels(data["channels"], problems)
    columns = context.parsed.get("columns")
    for name in channels.identity if channels is not None and columns is not None else ():
        if columns.role(name) in ("drop", "pseudonymize"):
            problems.append(f"[columns] lists the identity column {name!r} under {columns.role(name)}, but a "
                            f"channel release publishes its identity columns as they are (its check joins the "
                            f"released rows back on them); remove {name!r} from [channels] identity, or list it "
                            f"under keep")
    return channels


def parse_channels(raw: Any, problems: Problems) -> ChannelSpec | None:
    """Parse ``[channels]``; add one line per problem to ``problems`` and return None if any."""
    where = "[channels]"
    if not isinstance(raw, dict):
        problems.append(f"{where} must be a table: related = [...], confidential = \"...\", none = \"...\"")
        return None
    before = len(problems)
    problems.unknown_keys(raw, CHANNEL_KEYS, where)
    related = _names(raw.get("related"), f"{where} related", problems)
    identity = _names(raw.get("identity"), f"{where} identity", problems)
    confidential = raw.get("confidential")
    if not isinstance(confidential, str) or not confidential:
        problems.append(f"{where} needs confidential = \"<column holding the confidential value>\"")
        confidential = ""
    none = raw.get("none")
    if not isinstance(none, str):
        problems.append(f"{where} needs none = \"<the confidential value that means no risk, v^0>\"")
        none = ""
    if confidential and confidential in related:
        problems.add(where, f"the confidential column {confidential!r} is also listed in related; "
                        f"a column is either confidential or confidentiality-related")
    if confidential and confidential in identity:
        problems.add(where, f"the confidential column {confidential!r} is also listed in identity; "
                        f"it would be released — remove it from identity")
    for name in sorted(set(related) & set(identity)):
        problems.add(where, f"column {name!r} is both related and identity; the release replaces "
                        f"related columns by the output channel, so list it once")
    thresholds = _numbers(raw.get("thresholds", {}), f"{where}.thresholds", problems)
    for value, u in thresholds.items():
        if not 0 < u <= 1:
            problems.append(f"{where}.thresholds: u for {value!r} is {u:g}; it must lie in [P(v), 1]")
    if none in thresholds:
        problems.append(f"{where}.thresholds: {none!r} is the none value v^0, which has no threshold")
    b = raw.get("b")
    if b is not None and (isinstance(b, bool) or not isinstance(b, int | float) or not math.isfinite(b) or b <= 0):
        problems.add(where, f"b = {b!r} must be a positive number, finite (the weighted-risk bound of eq. 4)")
    weights = _numbers(raw.get("weights", {}), f"{where}.weights", problems)
    if weights and b is None:
        problems.add(where, "weights (c_k) only matter with b (eq. 4); add b = … or remove weights")
    if none in weights:
        problems.append(f"{where}.weights: {none!r} is the none value; its weight c_0 is 0 by definition")
    for value, c in weights.items():
        if c < 0:
            problems.append(f"{where}.weights: c for {value!r} is {c:g}; weights must be >= 0")
    nulls = _choice(raw, "nulls", ("error", "category"), "error", problems)
    confidential_nulls = _choice(raw, "confidential_nulls", ("error", "none"), "error", problems)
    null_label = raw.get("null_label", "NULL")
    if not isinstance(null_label, str):
        problems.add(where, "null_label must be a string")
        null_label = "NULL"
    candidates = raw.get("candidates")
    if candidates is not None and candidates != "all" and (
            isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1):
        problems.add(where, "candidates must be a whole number >= 1 or \"all\" (every output channel "
                        "that passes eq. 5)")
        candidates = None
    max_size = _positive_int(raw, "max_size", 8, 2, problems)
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        problems.add(where, "seed must be a whole number >= 0")
        seed = 0
    integer = _choice(raw, "integer", INTEGER_MODES, "auto", problems)
    time_limit = raw.get("time_limit", 10.0)
    if (isinstance(time_limit, bool) or not isinstance(time_limit, int | float) or not math.isfinite(time_limit)
            or time_limit <= 0):
        problems.add(where, f"time_limit = {time_limit!r} must be a finite positive number of seconds")
        time_limit = 10.0
    label_column = raw.get("label_column", "output_channel")
    if not isinstance(label_column, str) or not label_column:
        problems.add(where, "label_column must be a column name")
        label_column = "output_channel"
    elif label_column in identity:
        problems.add(where, f"label_column {label_column!r} is also an identity column; pick another name")
    outputs = _outputs(raw.get("outputs", []), len(related), problems)
    if len(problems) > before:
        return None
    return ChannelSpec(related=related, confidential=confidential, none=none, identity=identity,
                       thresholds=thresholds, b=None if b is None else float(b), weights=weights, nulls=nulls,
                       null_label=null_label, confidential_nulls=confidential_nulls, candidates=candidates,
                       max_size=max_size, seed=seed, outputs=outputs, integer=integer,
                       time_limit=float(time_limit), label_column=label_column)


def _names(raw: Any, where: str, problems: Problems) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw or not all(isinstance(v, str) and v for v in raw):
        problems.append(f"{where} must be a non-empty list of column names")
        return ()
    if len(set(raw)) != len(raw):
        problems.append(f"{where} lists a column twice; list each once")
    return tuple(raw)


def _numbers(raw: Any, where: str, problems: Problems) -> dict[str, float]:
    if not isinstance(raw, dict):
        problems.append(f"{where} must be a table of confidential value = number")
        return {}
    out: dict[str, float] = {}
    for key, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            problems.add(where, f"{key!r} = {value!r} is not a finite number")
        else:
            out[str(key)] = float(value)
    return out


def _choice(raw: dict[str, Any], key: str, allowed: tuple[str, ...], default: str, problems: Problems) -> str:
    value = raw.get(key, default)
    if value not in allowed:
        problems.add("[channels]", f"{key} must be one of {', '.join(repr(a) for a in allowed)}")
        return default
    return str(value)


def _positive_int(raw: dict[str, Any], key: str, default: int, least: int, problems: Problems) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        problems.add("[channels]", f"{key} must be a whole number >= {least}")
        return default
    return value


def _outputs(raw: Any, width: int, problems: Problems) -> tuple[tuple[tuple[str, ...], ...], ...]:
    """``outputs = [[["H","H","H","V"], ["L","H","L","N"]], …]``: each output channel is a
    list of input channels, each a list of related values in ``related`` order."""
    where = "[channels] outputs"
    if not isinstance(raw, list):
        problems.append(f"{where} must be a list of output channels, each a list of input channels")
        return ()
    out = []
    for i, channel in enumerate(raw, 1):
        ok = isinstance(channel, list) and len(channel) >= 2 and all(
            isinstance(member, list) and len(member) == width and all(isinstance(v, str) for v in member)
            for member in channel)
        if not ok:
            problems.append(f"{where} #{i}: an output channel is a list of at least two input channels, each "
                            f"a list of {width} related values (strings, in related order)")
            continue
        out.append(tuple(tuple(m) for m in channel))
    return tuple(out)
