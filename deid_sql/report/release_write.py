"""Writing the expert-determination report: the HTML page and its JSON twin, both or neither.

A reviewer signs the page and a program reads the twin; if only one of them landed (a full disk,
an interrupted run), the signed page could describe a release the twin does not, so both go
through ``atomic.replacing_together``.  ``check_report_target`` refuses a bad target before any
work is done, so a release written with ``--report`` is not written at all when its report could
not be (the target exists, the folder is missing, the name is not ``.html``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import OutputError
from ..release.sidecar import json_safe
from ..storage.atomic import replacing_together
from .release_html import render_html


def report_paths(html: Path) -> list[Path]:
    """The page and its JSON twin (``report.html`` → ``report.json``)."""
    return [html, html.with_suffix(".json")]


def check_report_target(html: Path, overwrite: bool, option: str = "--out") -> list[Path]:
    """Refuse, before anything is computed or written, a report target that cannot be written:
    not ``.html``, in a missing folder, or (without ``overwrite``) already there with its twin."""
    if html.suffix.lower() != ".html":
        raise OutputError(f"{option} {html}: the report is an HTML page; name it with .html (e.g. report.html); "
                          f"its JSON twin goes beside it as {html.with_suffix('.json').name}")
    if html.is_dir():
        raise OutputError(f"{option} {html} is a folder; name the report file, e.g. {html / 'report.html'}")
    paths = report_paths(html)
    for path in paths:
        if not path.parent.exists():
            raise OutputError(f"output folder {path.parent} does not exist; create it first")
        if path.exists() and not overwrite:
            raise OutputError(f"output {path} already exists; pass --overwrite to replace it"
                              + ("" if path == html else f" (the JSON twin of {html.name})"))
    return paths


def report_json(report: dict[str, Any]) -> str:
    """The twin's text: the report dict as it was rendered; an infinite figure (a criterion judged on
    no group) is null, as in the sidecar (``release.sidecar.json_safe``), and NaN is refused, since JSON
    has none and a reader would choke on it."""
    return json.dumps(json_safe(report, nan=False), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def write_report(report: dict[str, Any], html: Path, overwrite: bool) -> list[Path]:
    """Render ``report`` and write ``html`` and ``html.with_suffix('.json')`` together, atomically
    (both land or none; without ``overwrite`` an existing target is refused); return both paths.
    Rendering happens before any file is touched, so a rendering error leaves nothing behind."""
    html = Path(html)
    paths = check_report_target(html, overwrite)
    page = render_html(report)
    try:
        twin = report_json(report)
    except ValueError as e:  # NaN or infinity in a figure: a bug of the builder, never a half report
        raise OutputError(f"the report of {html} holds a number JSON cannot write ({e}); nothing was written") \
            from None
    with replacing_together(paths, overwrite) as (tmp_html, tmp_json):
        tmp_html.write_text(page, encoding="utf-8")
        tmp_json.write_text(twin, encoding="utf-8")
    return paths
