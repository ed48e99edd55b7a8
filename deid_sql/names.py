"""Table and view names given on the command line or to the API, parsed strictly.

A name is never handed to a SQL parser (``'a.b/*'`` crashed it, ``'a.b--'`` silently became
``a.b``): it is split here and every part enters the SQL as a quoted identifier.

- ``NAME`` without a dot is taken literally, whatever it holds (``Patients 2024``, ``v;--``);
- ``SCHEMA.NAME`` names a table or view in a schema; each part is a plain identifier
  (letters, digits, ``_``, ``$``; not starting with a digit) or a double-quoted one
  (``"my.schema"."a b"``, ``""`` for a quote inside; identifier characters may follow the closing
  quote, so that ``"a b"__release``, the sidecar table of ``"a b"``, is a name too);
- anything else — an empty name or part, more than two parts, a part that is neither form,
  a control character — is refused in one line with the accepted forms.
"""

from __future__ import annotations

import re

from sqlglot import exp

from .errors import OutputError

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_QUOTED = re.compile(r'"((?:[^"]|"")+)"([A-Za-z0-9_$]*)')  # a suffix after the quote: a sidecar's NAME__release
FORMS = ('NAME (any text without a dot) or SCHEMA.NAME, each part letters, digits, _ or $ '
         '(not starting with a digit) or "double-quoted"')


def split_name(text: str, what: str = "table name") -> tuple[str | None, str]:
    """``(schema or None, name)`` of ``text``; raises ``OutputError`` (one line) when it is not a name."""
    def refuse(why: str) -> OutputError:
        return OutputError(f"{what} {text!r} {why}; use {FORMS}")

    if not isinstance(text, str) or not text.strip():
        raise refuse("is empty")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise refuse("holds a control character")
    if "." not in text and not text.startswith('"'):
        if text != text.strip():
            raise refuse("starts or ends with a space")
        return None, text
    parts: list[str] = []
    pos = 0
    while True:
        for pattern, quoted in ((_QUOTED, True), (_PLAIN, False)):
            m = pattern.match(text, pos)
            if m:
                parts.append(m.group(1).replace('""', '"') + m.group(2) if quoted else m.group(0))
                pos = m.end()
                break
        else:
            raise refuse(f"is not a name at {text[pos:pos + 20]!r}")
        if pos == len(text):
            break
        if text[pos] != "." or pos + 1 == len(text):
            raise refuse(f"is not a name at {text[pos:pos + 20]!r}")
        pos += 1
    if len(parts) > 2:
        raise refuse(f"has {len(parts)} parts")
    return (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])


def table_name(text: str, what: str = "table name") -> exp.Table:
    """``text`` as a table expression of quoted identifiers (``split_name``)."""
    schema, name = split_name(text, what)
    return exp.Table(this=exp.to_identifier(name, quoted=True),
                     db=exp.to_identifier(schema, quoted=True) if schema is not None else None)


def check_name(text: str, what: str = "table name") -> str:
    """``text`` unchanged once it parses (for callers that pass names on as text)."""
    split_name(text, what)
    return text


__all__ = ["FORMS", "check_name", "split_name", "table_name"]
