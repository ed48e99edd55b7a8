"""Reports: boundary and frontier reports, and the expert-determination report of a release.

Modules:

- ``attribute_section.py``: the "attribute disclosure" section: per judged sensitive column the gate's figures
  and verdicts, the worst group by its labels, the histogram of the largest share per group; the unjudged ones
- ``boundaries.py``: boundary-policy results as rows, written to CSV or JSON atomically
- ``cautions.py``: what a reviewer must weigh even on a pass: k = 1, unique records, record risk ≥ 0.5, a
  population estimate that fell back, a sensitive column no attribute criterion judges
- ``estimates.py``: one headline risk (the gate's model) beside the other estimators of the page: their range,
  whether they disagree, and the most pessimistic, for the summary and the cautions
- ``frontier_report.py``: what a frontier report shows (stair-step, risk floor, policies beating Safe
  Harbor), independent of drawing
- ``html.py``: the frontier as one self-contained HTML page (inline SVG, nothing fetched)
- ``plot.py``: the frontier as a PNG (matplotlib Agg canvas, imported inside the function)
- ``release_contents.py``: the report's contents from cells grouped with the gate's ``Census``: histograms,
  rules in words, marginals, information kept, losses, sample rows
- ``release_html.py``: the report as one HTML page rendered with Jinja2 (autoescaped)
- ``release_report.py``: the expert-determination report of a ``ReleasePlan`` as a dict: the gate's figures
  on the release query, ``evaluate``'s comparison with Safe Harbor and the original data, frontier placement
- ``release_write.py``: the page and its JSON twin written together; the target checked before any work
- ``risk_models.py``: the risk model a release was judged with, in words: record risk, what expected
  re-identifications counts, assumptions, population, and its papers, for every model the spec can name
- ``svg_charts.py``: inline SVG charts for the report (bars, histograms, scatter)
- ``templates/release_report.html.j2``: the report page's template

May import: ``adversary``, ``compiler``, ``contract``, ``domains``, ``errors``, ``evaluate``, ``loading``, ``nocensus``,
    ``policyfile``, ``registry``, ``release``, ``search``, ``spec``, ``storage``.
Imported by: ``cli``, ``jobs``.
"""

from .boundaries import boundary_rows, write_boundaries

__all__ = ["boundary_rows", "write_boundaries"]
