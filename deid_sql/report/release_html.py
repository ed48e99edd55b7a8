"""The expert-determination report as one self-contained HTML page: ``render_html(report)``.

The page is rendered with Jinja2 from ``templates/release_report.html.j2``, for three reasons:
it is the Python ecosystem's default template engine (the dbt integration already speaks it),
the page's layout then lives in one readable template file a reviewer's organisation can read
or adapt instead of in strings scattered through code, and it escapes by default — the
environment has ``autoescape=True``, so every value that comes from the data or the spec (a
category label, a column name, a file path) is text, never markup.  The only values marked
safe are the SVG charts, which ``svg_charts`` builds with every data text escaped.

The page fetches nothing: no script, font, image or stylesheet from anywhere, charts inline
(SVG), so it opens on an air-gapped review machine and prints as it shows.  Numbers are
formatted here for reading (1,234 · 0.000232) and carried exactly in ``data-`` attributes,
so a test can compare the page with the report dict it came from.

The template is loaded through the package (``PackageLoader``), never a path in the
repository, so the page renders the same from a wheel.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import jinja2
from markupsafe import Markup

from ..release.unit import Unit
from .svg_charts import (
    AFTER_COLOUR,
    BEFORE_COLOUR,
    POPULATION_COLOUR,
    SAFE_HARBOR_MARK,
    SAMPLE_COLOUR,
    bar_chart,
    histogram,
    paired_histogram,
    readable_number,
    scatter,
    share_text,
)

TEMPLATE = "release_report.html.j2"
FORMAT, VERSION = "deid-sql-report", 1

#: the risk figures in the order and words the report shows them
FIGURES = {
    "records": "records released",
    "groups": "released groups",
    "expected_reidentifications": "expected re-identifications",
    "mean_record_risk": "mean record risk",
    "max_record_risk": "maximum record risk",
    "k": "k (records in the smallest group)",
    "sample_uniques": "sample-unique records",
    "suppressed": "suppressed records",
    "risk": "normalized risk (original data = 1)",
}
#: the comparison table's columns
COMPARED = {
    "expected_reidentifications": "expected re-identifications",
    "max_record_risk": "maximum record risk",
    "k": "k",
    "sample_uniques": "sample uniques",
    "risk": "normalized risk",
    "loss": "normalized loss",
}
#: the labels that name the counted unit, with [person] (``release.unit``): persons, not records
PERSON_FIGURES = {"records": "persons released", "mean_record_risk": "mean risk per person",
                  "max_record_risk": "maximum risk per person", "k": "k (persons in the smallest group)",
                  "sample_uniques": "sample-unique persons", "suppressed": "suppressed persons"}
PERSON_COMPARED = {"max_record_risk": "maximum risk per person"}
VERDICT_WORDS = {
    "passed": "Passed: every criterion of the release gate holds",
    "failed": "Failed: at least one criterion of the release gate does not hold",
    "accepted": "Accepted: a criterion does not hold; the risk was accepted with a written reason",
}


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("deid_sql.report", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True)
    env.filters.update(num=readable_number, pct=share_text, exact=exact, words=words, value=value_text,
                       fraction=fraction)
    return env


def render_html(report: dict[str, Any]) -> str:
    """The report's page (see the module docstring); ``report`` follows the report CONTRACT.

    A dict that does not (another format or version, a key missing) raises ``ValueError`` in one
    line naming what is wrong: the template's undefined values are strict, because a report
    that silently leaves out a figure is worse than none.
    """
    if report.get("format") != FORMAT or report.get("version") != VERSION:
        raise ValueError(f"not a {FORMAT} version {VERSION} dict (format {report.get('format')!r}, "
                         f"version {report.get('version')!r}); build it with build_report")
    try:
        verdict = report["summary"]["verdict"]
        words = VERDICT_WORDS.get(verdict, verdict)
        warned = len(report["summary"]["cautions"])
        if warned:  # a pass is never shown alone when there is something to weigh
            words += f" — with {warned} caution{'' if warned == 1 else 's'} below"
        unit = unit_of(report)
        return _environment().get_template(TEMPLATE).render(
            r=report, charts=charts(report), figures=figure_words(unit), compared=compared_words(unit),
            verdict_words=words, unit=unit)
    except (jinja2.UndefinedError, KeyError, TypeError) as e:
        raise ValueError(f"the report dict does not follow the {FORMAT} contract: {e}") from e


def unit_of(report: dict[str, Any]) -> Unit:
    """What the report's figures count (its ``unit``; records for a dict written before it had one)."""
    return Unit.from_dict(report.get("unit"))


def figure_words(unit: Unit) -> dict[str, str]:
    """The figures' labels in ``unit``'s words (``FIGURES`` for records)."""
    return FIGURES | PERSON_FIGURES if unit.persons else dict(FIGURES)


def compared_words(unit: Unit) -> dict[str, str]:
    """The comparison table's column labels in ``unit``'s words (``COMPARED`` for records)."""
    return COMPARED | PERSON_COMPARED if unit.persons else dict(COMPARED)


def charts(report: dict[str, Any]) -> dict[str, Any]:
    """Every chart of the page as finished SVG markup (escaped inside ``svg_charts``), its axes
    in the unit the figures count."""
    unit = unit_of(report)
    risk = report["risk"]
    hist = risk["record_risk_histogram"]
    sizes = risk["group_sizes"]
    series, keys = [("sample", sizes["sample"], SAMPLE_COLOUR)], ["sample"]
    counted = risk["model"].get("group_sizes")
    if sizes.get("population") is not None and counted:  # no census: nothing counted, no population bars
        series.append((counted, sizes["population"], POPULATION_COLOUR))
        keys.append("population")
    out: dict[str, Any] = {
        "record_risk": Markup(histogram("record-risk-histogram", hist["edges"], hist["counts"],
                                        title=("Persons by their risk" if unit.persons else "Records by record risk"),
                                        x_label=f"{unit.risk} (the last bin: 0.5 to 1)", y_label=unit.many,
                                        key="records", log_counts=True)),
        "group_sizes": Markup(paired_histogram(
            "group-size-histogram", sizes["edges"], series, keys=keys,
            title=("Released groups by size, in the sample and in the population" if len(series) > 1 else
                   f"Released groups by their {unit.many} in the sample"),
            x_label=(f"group size ({unit.many} in the sample; " + counted + ")" if len(series) > 1 else
                     f"group size ({unit.many} in the sample)"), y_label="groups")),
        "marginals": [
            {"qi": m["qi"],
             "before": Markup(bar_chart(f"marginal-{i}-before", [(b["label"], b["share"]) for b in m["before"]],
                                        title="original", colour=BEFORE_COLOUR)),
             "after": Markup(bar_chart(f"marginal-{i}-after", [(a["label"], a["share"]) for a in m["after"]],
                                       title="released", colour=AFTER_COLOUR))}
            for i, m in enumerate(report["utility"]["marginals"])],
        "attribute": [None if a.get("confidence_histogram") is None else Markup(histogram(
            f"attribute-{i}-confidence", a["confidence_histogram"]["edges"], a["confidence_histogram"]["counts"],
            title=f"Released groups by the largest share of their {unit.many} holding one value of {a['column']}",
            x_label=f"largest share of a group's {unit.many} holding one value (1: all of them)",
            y_label="groups")) for i, a in enumerate(risk.get("attribute") or [])],
        "frontier": None,
    }
    frontier = report.get("frontier")
    if frontier:
        marked = [("frontier-this", "this policy", frontier["this"], AFTER_COLOUR, "circle")]
        if frontier.get("safe_harbor") is not None:
            marked.append(("frontier-safe-harbor", "Safe Harbor", frontier["safe_harbor"], SAFE_HARBOR_MARK,
                           "star"))
        out["frontier"] = Markup(scatter("frontier-chart", frontier["points"], marked,
                                         title="This policy among the searched policies"))
    return out


def exact(v: Any) -> str:
    """A value as a ``data-`` attribute holds it: repr of a number (parses back to the same
    double in JavaScript), JSON of a list or dict, the text itself otherwise; "" for None."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple, dict)):
        return json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    return str(v)


def words(key: str) -> str:
    """A dict key as words: ``max_record_risk`` → ``max record risk``."""
    return str(key).replace("_", " ")


def value_text(v: Any, limit: int = 12) -> str:
    """Any value of the report as text to read: numbers formatted, lists joined (long ones
    shortened to their first and last items), dicts as ``key: value`` pairs."""
    if v is None:
        return "–"
    if isinstance(v, (bool, int, float)):
        return readable_number(v)
    if isinstance(v, (list, tuple)):
        items = [value_text(x) for x in v]
        if len(items) > limit:
            items = [*items[: limit - 2], f"… ({len(items) - limit + 1:,} more) …", items[-1]]
        return ", ".join(items)
    if isinstance(v, dict):
        return "; ".join(f"{k}: {value_text(x)}" for k, x in v.items())  # keys as given: they may be column names
    return str(v)


def fraction(v: Any) -> str:
    """``0.05`` → ``1/20`` when a risk is (within rounding) one over a whole number, else ""."""
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 < v <= 1:
        return ""
    n = round(1 / v)
    return f"1/{n:,}" if n >= 1 and abs(1 / n - v) <= 1e-6 * v else ""
