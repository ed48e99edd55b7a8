"""Run the documentation's examples: the fenced blocks of README.md and docs/*.md.

Conventions (the docs follow them; ``tests/test_docs.py`` runs them):

- ```` ```bash ```` and ```` ```python ```` blocks run, in page order, in one folder prepared from
  ``deid-sql demo --dir demo`` (the working folder has ``demo/`` in it, and ``../shared`` points at the
  repository's ``../shared``, so ``../shared/data/adult`` means the same as from a clone).  Each bash
  block is one ``bash -e`` script, each python block one ``python`` script; they share only files.
- A command followed by a line ``# exit N`` (optionally ``# exit N: start of the message…``) must exit
  with N (and print that on stderr); any other failing command fails the block.
- ``pip install …`` lines are not run: the extras they name must exist in pyproject.toml.
- Attributes after the language say what a block needs: ``engine=postgres`` (``DEID_TEST_POSTGRES_DSN``,
  exported to the block as ``DEID_DSN``), ``engine=spark`` (pyspark), ``adult`` (the Adult data in
  ``../shared/data/adult``), ``dbt`` (dbt-duckdb).  Blocks of one need run in their own folder, after
  each other, and only when it is there (locally skipped; under ``CI=true`` a failure).
- ```` ```text output ```` right after a run block lists lines its stdout must contain (``…`` stands
  for any text).  Other languages (``toml``, ``text``, ``json``, ``yaml``) are shown, not run; TOML
  blocks must parse.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
ADULT = SHARED / "data" / "adult"
RUN = ("bash", "python")
SHOWN = ("toml", "text", "json", "yaml", "sql", "")
NEEDS = ("engine=postgres", "engine=spark", "adult", "dbt")
EXIT = re.compile(r"^#\s*exit (\d+)(?::\s*(.*))?$")
PIP = re.compile(r"^\s*pip install\s+(.*)$")


@dataclass
class Block:
    """One fenced block of a page."""

    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    attrs: tuple[str, ...]
    text: str
    expected: list[str] = field(default_factory=list)  # lines of a following ```text output block

    @property
    def need(self) -> str:
        """What the block needs beyond the demo folder ('' for nothing)."""
        found = [a for a in self.attrs if a in NEEDS]
        return found[0] if found else ""

    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def pages() -> list[Path]:
    """README.md and every page of the user guide."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page``, with ```text output blocks attached to the block before them."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\S*)\s*(.*)$", lines[i])
        if not m:
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and lines[i] != "```":
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise AssertionError(f"{page.name}:{start + 1}: unclosed code block")
        i += 1
        attrs = tuple(m.group(2).split())
        if m.group(1) == "text" and "output" in attrs:
            if not found or found[-1].lang not in RUN:
                raise AssertionError(f"{page.name}:{start + 1}: a ```text output block follows no example")
            found[-1].expected = [line.rstrip() for line in body if line.strip()]
            continue
        found.append(Block(page, start + 1, m.group(1), attrs, "\n".join(body) + "\n"))
    return found


def extras(line: str) -> list[str]:
    """The extras a ``pip install`` line names ('.[a,b]', 'deid-sql[a]')."""
    named: list[str] = []
    for word in shlex.split(line):
        m = re.match(r"^(?:\.|deid-sql)\[([^\]]*)\]$", word)
        if m:
            named += [e.strip() for e in m.group(1).split(",") if e.strip()]
    return named


def pip_lines(block: Block) -> list[str]:
    return [m.group(1) for m in map(PIP.match, block.text.splitlines()) if m]


def bash_script(text: str) -> str:
    """The block as a script: pip lines skipped, ``# exit N`` expectations turned into checks."""
    lines = text.splitlines()
    out = ["set -eo pipefail"]
    for i, line in enumerate(lines):
        if PIP.match(line):
            out.append(": skipped " + shlex.quote(line.strip()))
            continue
        expect = EXIT.match(lines[i + 1].strip()) if i + 1 < len(lines) else None
        if expect is None or not line.strip() or line.lstrip().startswith("#"):
            out.append(line)
            continue
        assert not line.rstrip().endswith("\\"), f"'# exit' after a continued line: {line}"
        code, message = expect.group(1), (expect.group(2) or "").split("…")[0].strip()
        said = shlex.quote(line.strip())
        out.append(f'__rc=0; {{ {line.strip()} ; }} 2>"$DOCS_STDERR" || __rc=$?; cat "$DOCS_STDERR" >&2; '
                   f'[ "$__rc" -eq {code} ] || {{ echo "docs: expected exit {code}, got $__rc: "{said} >&2; '
                   'exit 97; }')
        if message:
            out.append(f'grep -qF -- {shlex.quote(message)} "$DOCS_STDERR" || '
                       f'{{ echo "docs: stderr lacks: "{shlex.quote(message)} >&2; exit 98; }}')
    return "\n".join(out) + "\n"


def environment(state: Path) -> dict[str, str]:
    """The venv's bin first on PATH (so ``deid-sql`` and ``dbt`` are the installed ones), quiet dbt.  No
    PYTHONPATH: the installed package is what runs (a checkout on the path would miss the folders it maps
    into the package, ``udfs/``, ``sql/`` and ``fixtures/``)."""
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", ""), "DOCS_STDERR": str(state / "stderr"),
           "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DO_NOT_TRACK": "1", "DBT_USE_COLORS": "false"}
    env.pop("PYTHONPATH", None)
    if os.environ.get("DEID_TEST_POSTGRES_DSN"):
        env["DEID_DSN"] = os.environ["DEID_TEST_POSTGRES_DSN"]
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env.setdefault("DEID_SQL_SPARK_HOME", str(state / "spark"))  # Spark's files: not the user's cache
    return env


def run_block(block: Block, cwd: Path, state: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run one block in ``cwd``; raise AssertionError with its output when it fails or misses expected lines."""
    script = state / ("block.sh" if block.lang == "bash" else "block.py")
    if block.lang == "bash":
        script.write_text(bash_script(block.text), encoding="utf-8")
        argv = ["bash", str(script)]
    else:
        script.write_text(block.text, encoding="utf-8")
        argv = [sys.executable, str(script)]
    done = subprocess.run(argv, cwd=cwd, env=environment(state), capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise AssertionError(f"{block.where()}: exit {done.returncode}\n--- block\n{block.text}--- stdout\n"
                             f"{done.stdout[-4000:]}--- stderr\n{done.stderr[-4000:]}")
    shown = [line.rstrip() for line in done.stdout.splitlines()]
    for want in block.expected:
        if not any(matches(want, got) for got in shown):
            raise AssertionError(f"{block.where()}: stdout lacks the documented line\n  {want}\n--- stdout\n"
                                 f"{done.stdout[-4000:]}")
    return done


def matches(want: str, got: str) -> bool:
    """``got`` is ``want`` with each ``…`` standing for any text."""
    pattern = ".*".join(re.escape(part) for part in want.split("…"))
    return re.fullmatch(pattern, got) is not None
