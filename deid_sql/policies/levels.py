"""Full-domain levels of the QIs, and the level-vector text ``sex:0|age:3|…`` (seed 004, ARX).

A QI's levels are its hierarchy's (level 0 the value itself, labels from the hierarchy CSV); without
a hierarchy, the bands its cut rule allows, finest first, then ``*`` (``cuts = { every = 5 }``: 5-,
10-, 20-year bands …); without either, two: kept and ``*``.  A level vector picks one level per QI; its text names
every QI (``QI:LEVEL``; QIs left out stay at level 0; ``top`` and ``bottom`` work).  The
full-domain search (``fulldomain.TransformationSpace``) and every release path that takes
``--levels`` read the same text into the same recodings, with the same labels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..domains.cuts import CutRule, rule_ladder
from ..domains.domain import Domain
from ..domains.hierarchy import Hierarchy
from ..domains.recoding import QIRecoding, Recoding
from ..errors import PolicyError

TOP_LABEL = "*"  # the one label of a QI without a hierarchy at its top level


def qi_levels(domain: Domain, hierarchy: Hierarchy | None, rule: CutRule | None = None) -> list[QIRecoding]:
    """The recodings of one QI's levels, bottom first: its hierarchy's; else the bands its cut rule
    allows (``domains.cuts.rule_ladder``: level 0 the finest, e.g. 5-year bands, then coarser, then
    ``*``), since a rule says the exact values may not be shown; else kept and ``*``."""
    if hierarchy is not None:
        return hierarchy.recodings(domain)
    top = QIRecoding.from_groups(domain, np.zeros(domain.size, dtype=np.int64), [TOP_LABEL])
    if rule is not None and not rule.hierarchy:  # (a rule that allows no cut leaves the top alone)
        return [QIRecoding(np.concatenate(([0], np.cumsum(bits, dtype=np.int64))), None, domain)
                for bits in rule_ladder(rule, domain)] + [top]
    return [QIRecoding.from_groups(domain, np.arange(domain.size)), top]


def parse_levels(text: str, names: Sequence[str], heights: Sequence[int]) -> tuple[int, ...]:
    """A level vector's text as levels, checked against each QI's height (``PolicyError``)."""
    text = text.strip()
    if not text:
        raise PolicyError(f"the levels are empty; write one level per QI, e.g. {names[0]}:1 (QIs left out stay at 0)")
    if text in ("top", "bottom"):
        return tuple(h - 1 for h in heights) if text == "top" else (0,) * len(heights)
    index = {n: i for i, n in enumerate(names)}
    levels = [0] * len(names)
    seen: set[str] = set()
    for segment in filter(None, (s.strip() for s in text.split("|"))):
        name, sep, body = segment.partition(":")
        name = name.strip()
        if not sep or name not in index:
            raise PolicyError(f"levels segment {segment!r} is not QI:LEVEL with a QI of {', '.join(names)} "
                              f"(e.g. {names[0]}:1)")
        if name in seen:
            raise PolicyError(f"the levels name QI {name!r} twice; give each QI once")
        seen.add(name)
        try:
            levels[index[name]] = int(body)
        except ValueError:
            raise PolicyError(f"level {body.strip()!r} of QI {name!r} is not a whole number") from None
    return check_levels(levels, names, heights)


def check_levels(levels: Sequence[int], names: Sequence[str], heights: Sequence[int]) -> tuple[int, ...]:
    t = tuple(int(v) for v in levels)
    if len(t) != len(heights):
        raise PolicyError(f"a level vector needs {len(heights)} levels ({', '.join(names)}), got {len(t)}")
    for name, v, h in zip(names, t, heights):
        if not 0 <= v < h:
            raise PolicyError(f"level {v} of QI {name!r} does not exist; its levels are 0..{h - 1}")
    return t


def levels_text(levels: Sequence[int], names: Sequence[str]) -> str:
    """``sex:0|age:3|…`` (parse back with ``parse_levels``)."""
    return "|".join(f"{n}:{int(v)}" for n, v in zip(names, levels))


def levels_recoding(text: str, names: Sequence[str], domains: Sequence[Domain],
                    hierarchies: Mapping[str, Hierarchy],
                    rules: Sequence[CutRule | None] | None = None) -> tuple[tuple[int, ...], Recoding]:
    """The level vector a text names and its recoding (named by its canonical text); ``rules``: each
    QI's cut rule (``qi_levels``)."""
    rules = list(rules) if rules is not None else [None] * len(names)
    per_qi = [qi_levels(d, hierarchies.get(n), r) for n, d, r in zip(names, domains, rules)]
    x = parse_levels(text, names, [len(lv) for lv in per_qi])
    return x, Recoding(tuple(per_qi[q][v] for q, v in enumerate(x)), name=levels_text(x, names))
