"""PostgreSQL writes that replace a release in place (``--overwrite``), and the
names they use.

A refresh must not break what the warehouse hangs on a release: the grants analysts were given,
the table's comment and owner, its column comments and indexes, the views analysts built on it.
DROP then CREATE loses all of them (and fails on a dependent view), so a table is built under a
staging name, judged there, and swapped in:

- without dependent views, the old table's owner, grants (``relacl``) and comment are copied
  onto the staging table, the old table is dropped and the staging table renamed into its place;
  then what else was hung on the old table is put back on the new one (``Kept``): column comments
  and column grants, constraints and ``NOT NULL``, indexes, triggers, storage parameters, row
  security and its policies, publications — each from the catalog's own definition, which names
  the table as the new one is now named.  One that cannot be put back (an index on a column the
  new release no longer has) refuses the refresh in one line, and the transaction leaves the old
  table as it was.  Not put back: column defaults, extended statistics, rules and security labels;
- with dependent views (``pg_depend`` through ``pg_rewrite``) the old table stays and its rows
  are replaced (``TRUNCATE`` + ``INSERT … SELECT`` from the staging table), so the views keep
  working and show the new rows; everything hung on it is untouched.

Everything — the staging table, the judgement, the swap and the ``__release`` sidecar — is one
transaction.  A staging table is therefore never committed: a writer killed at any point (kill -9,
a lost connection, a server crash) leaves nothing, because PostgreSQL rolls the transaction back
when its session ends.  Staging tables are still named ``deid_staging_<server pid>_<n>``, and
``sweep_staging`` (run when deid-sql connects) drops any whose server process is gone: nothing
should ever be left, but a name that says whose it is can always be cleaned up safely.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql as pgsql

from ..errors import OutputError
from ..storage.names import Name, parse_name

STAGING_PREFIX = "deid_staging_"
_STAGING = re.compile(r"deid_staging_(\d+)_\d+")
_counter = itertools.count()
KINDS = {"r": "table", "p": "table", "v": "view", "m": "materialized view", "f": "foreign table"}


def pg_name(text: str, what: str = "table name") -> Name:
    """``text`` parsed by PostgreSQL's identifier rules (``names.parse_name``)."""
    return parse_name(text, "postgres", what)


def ident(name: Name) -> pgsql.Identifier:
    return pgsql.Identifier(*name.parts)


def regclass_text(name: Name) -> str:
    """The name as ``to_regclass`` reads it: every part quoted."""
    return ".".join('"' + p.replace('"', '""') + '"' for p in name.parts)


def kind_of(con: psycopg.Connection[Any], name: Name) -> str | None:
    """What ``name`` is in the catalog (``table``, ``view``, …), None when nothing has that name."""
    row = con.execute("SELECT c.relkind FROM pg_class c WHERE c.oid = to_regclass(%s)",
                      [regclass_text(name)]).fetchone()
    return None if row is None else KINDS.get(str(row[0]), "relation")


def staging_for(con: psycopg.Connection[Any], target: Name) -> Name:
    """A fresh staging name in the target's schema (a rename cannot move a table between schemas)."""
    pid = con.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
    return target.with_name(f"{STAGING_PREFIX}{pid}_{next(_counter)}")


def sweep_staging(con: psycopg.Connection[Any]) -> list[str]:
    """Drop staging tables whose server process is gone; returns what was dropped.  A table this
    role may not drop is left to its owner's next run."""
    rows = con.execute(
        "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind = 'r' AND c.relname LIKE 'deid\\_staging\\_%%'").fetchall()
    if not rows:
        return []
    alive = {r[0] for r in con.execute("SELECT pid FROM pg_stat_activity").fetchall()}
    dropped = []
    for schema, table in rows:
        m = _STAGING.fullmatch(table)
        if m is None or int(m.group(1)) in alive:
            continue
        try:
            con.execute(pgsql.SQL("DROP TABLE IF EXISTS {}").format(pgsql.Identifier(schema, table)))
            dropped.append(f"{schema}.{table}")
        except psycopg.Error:
            continue
    return dropped


def has_dependent_views(con: psycopg.Connection[Any], name: Name) -> bool:
    """Whether a view (or materialized view) reads ``name``: its rewrite rule depends on the table."""
    row = con.execute(
        "SELECT 1 FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid "
        "WHERE d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass "
        "AND d.refobjid = to_regclass(%s) AND r.ev_class <> d.refobjid LIMIT 1", [regclass_text(name)]).fetchone()
    return row is not None


def copy_properties(con: psycopg.Connection[Any], old: Name, new: Name) -> None:
    """The old table's owner, grants and comment onto the new one (before the swap)."""
    put_properties(con, new, properties(con, old))


Properties = tuple[str | None, str | None, list[tuple[str | None, str, bool]]]


def properties(con: psycopg.Connection[Any], name: Name) -> Properties:
    """A table's or view's owner, comment and grants (grantee None: PUBLIC), to put back on its
    replacement (``put_properties``)."""
    owner, comment = con.execute(
        "SELECT pg_get_userbyid(c.relowner), obj_description(c.oid, 'pg_class') FROM pg_class c "
        "WHERE c.oid = to_regclass(%s)", [regclass_text(name)]).fetchone() or (None, None)
    grants = con.execute(
        "SELECT CASE WHEN a.grantee = 0 THEN NULL ELSE pg_get_userbyid(a.grantee) END, a.privilege_type, "
        "a.is_grantable FROM pg_class c, aclexplode(c.relacl) a WHERE c.oid = to_regclass(%s)",
        [regclass_text(name)]).fetchall()
    return owner, comment, [(g, str(p), bool(o)) for g, p, o in grants]


def put_properties(con: psycopg.Connection[Any], name: Name, props: Properties, kind: str = "TABLE") -> None:
    """``properties`` of a replaced table (``kind`` TABLE) or view (VIEW) onto ``name``."""
    owner, comment, grants = props
    if owner is not None and owner != con.execute("SELECT current_user").fetchone()[0]:  # type: ignore[index]
        con.execute(pgsql.SQL("ALTER {} {} OWNER TO {}").format(pgsql.SQL(kind), ident(name),
                                                                 pgsql.Identifier(owner)))
    if comment is not None:
        con.execute(pgsql.SQL("COMMENT ON {} {} IS {}").format(pgsql.SQL(kind), ident(name), pgsql.Literal(comment)))
    if grants:  # an explicit ACL replaces the default one: start from none, as the old table's did
        con.execute(pgsql.SQL("REVOKE ALL ON {} FROM PUBLIC").format(ident(name)))
    for grantee, privilege, grantable in grants:
        to = pgsql.SQL("PUBLIC") if grantee is None else pgsql.Identifier(grantee)
        con.execute(pgsql.SQL("GRANT {} ON {} TO {}{}").format(
            pgsql.SQL(privilege), ident(name), to, pgsql.SQL(" WITH GRANT OPTION" if grantable else "")))


@dataclass(frozen=True)
class Kept:
    """What a table carries besides its rows, owner, grants and comment (``properties``), read
    before a refresh drops it and put back on the table renamed into its place (``restore``).
    ``statements`` are the catalog's own definitions (``pg_get_constraintdef``, ``pg_get_indexdef``,
    ``pg_get_triggerdef``, ``pg_get_expr``): SQL that PostgreSQL wrote, never a user's value."""

    column_comments: tuple[tuple[str, str], ...]
    column_grants: tuple[tuple[str, str | None, str, bool], ...]  # column, grantee (None: PUBLIC), privilege
    not_null: tuple[str, ...]
    statements: tuple[tuple[str, str, pgsql.Composable], ...]  # what it is, its name, the SQL that makes it
    options: tuple[tuple[str, str], ...]  # storage parameters (reloptions)
    row_security: tuple[bool, bool]  # enabled, forced


_OPTION = re.compile(r"[a-z_][a-z0-9_.]*")
_POLICY_COMMANDS = {"*": "ALL", "r": "SELECT", "a": "INSERT", "w": "UPDATE", "d": "DELETE"}


def kept(con: psycopg.Connection[Any], name: Name) -> Kept:
    """``Kept`` of the table ``name``."""
    oid = con.execute("SELECT to_regclass(%s)::oid", [regclass_text(name)]).fetchone()[0]  # type: ignore[index]
    columns = ("FROM pg_attribute a WHERE a.attrelid = %(t)s AND a.attnum > 0 AND NOT a.attisdropped")
    comments = con.execute(f"SELECT a.attname, col_description(a.attrelid, a.attnum) {columns} "
                           "AND col_description(a.attrelid, a.attnum) IS NOT NULL ORDER BY a.attnum", {"t": oid})
    grants = con.execute(
        "SELECT a.attname, CASE WHEN g.grantee = 0 THEN NULL ELSE pg_get_userbyid(g.grantee) END, g.privilege_type, "
        "g.is_grantable FROM pg_attribute a, aclexplode(a.attacl) g WHERE a.attrelid = %(t)s AND a.attnum > 0 "
        "AND NOT a.attisdropped ORDER BY a.attnum", {"t": oid})
    not_null = con.execute(f"SELECT a.attname {columns} AND a.attnotnull ORDER BY a.attnum", {"t": oid})
    target = ident(name)
    statements: list[tuple[str, str, pgsql.Composable]] = []
    # constraints: keys first (a foreign key of the table on itself needs its key), foreign keys last
    for conname, definition in con.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %(t)s "
            "AND contype <> 't' ORDER BY contype = 'f', contype NOT IN ('p', 'u'), conname", {"t": oid}):
        statements.append(("constraint", conname, pgsql.SQL("ALTER TABLE {} ADD CONSTRAINT {} {}").format(
            target, pgsql.Identifier(conname), pgsql.SQL(definition))))
    for index, definition in con.execute(  # those of constraints come with them
            "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = %(t)s AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid "
            "AND k.conrelid = i.indrelid) ORDER BY c.relname", {"t": oid}):
        statements.append(("index", index, pgsql.SQL(definition)))
    for trigger, definition, enabled in con.execute(
            "SELECT tgname, pg_get_triggerdef(oid), tgenabled FROM pg_trigger WHERE tgrelid = %(t)s "
            "AND NOT tgisinternal ORDER BY tgname", {"t": oid}):
        statements.append(("trigger", trigger, pgsql.SQL(definition)))
        if enabled == "D":
            statements.append(("trigger", trigger, pgsql.SQL("ALTER TABLE {} DISABLE TRIGGER {}").format(
                target, pgsql.Identifier(trigger))))
    for policy, permissive, roles, command, using, check in con.execute(
            "SELECT polname, polpermissive, ARRAY(SELECT CASE WHEN r = 0 THEN NULL ELSE pg_get_userbyid(r) END "
            "FROM unnest(polroles) r), polcmd, pg_get_expr(polqual, polrelid), pg_get_expr(polwithcheck, polrelid) "
            "FROM pg_policy WHERE polrelid = %(t)s ORDER BY polname", {"t": oid}):
        to = pgsql.SQL(", ").join(pgsql.SQL("PUBLIC") if r is None else pgsql.Identifier(r) for r in roles)
        parts = [pgsql.SQL("CREATE POLICY {} ON {} AS {} FOR {} TO {}").format(
            pgsql.Identifier(policy), target, pgsql.SQL("PERMISSIVE" if permissive else "RESTRICTIVE"),
            pgsql.SQL(_POLICY_COMMANDS[str(command)]), to)]
        parts += [pgsql.SQL("USING ({})").format(pgsql.SQL(using))] if using is not None else []
        parts += [pgsql.SQL("WITH CHECK ({})").format(pgsql.SQL(check))] if check is not None else []
        statements.append(("policy", policy, pgsql.SQL(" ").join(parts)))
    # a publication's column list and row filter came with PostgreSQL 15
    listing = ("ARRAY(SELECT a.attname FROM unnest(r.prattrs) n JOIN pg_attribute a ON a.attrelid = r.prrelid "
               "AND a.attnum = n), pg_get_expr(r.prqual, r.prrelid)" if con.info.server_version >= 150000
               else "ARRAY[]::name[], NULL")
    for publication, columns_of, where in con.execute(
            f"SELECT p.pubname, {listing} FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid "
            "WHERE r.prrelid = %(t)s ORDER BY p.pubname", {"t": oid}):
        listed = (pgsql.SQL(" ({})").format(pgsql.SQL(", ").join(map(pgsql.Identifier, columns_of)))
                  if columns_of else pgsql.SQL(""))
        filtered = pgsql.SQL(" WHERE ({})").format(pgsql.SQL(where)) if where is not None else pgsql.SQL("")
        statements.append(("publication", publication, pgsql.SQL("ALTER PUBLICATION {} ADD TABLE {}{}{}").format(
            pgsql.Identifier(publication), target, listed, filtered)))
    options, enabled, forced = con.execute(
        "SELECT coalesce(reloptions, '{}'), relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = %(t)s",
        {"t": oid}).fetchone() or ([], False, False)
    pairs = tuple(tuple(str(o).split("=", 1)) for o in options)
    return Kept(tuple(comments.fetchall()), tuple((c, g, str(p), bool(o)) for c, g, p, o in grants.fetchall()),
                tuple(r[0] for r in not_null.fetchall()), tuple(statements),
                tuple((k, v) for k, v in pairs if _OPTION.fullmatch(k)),  # type: ignore[misc]
                (bool(enabled), bool(forced)))


def restore(con: psycopg.Connection[Any], name: Name, old: Kept, flag: str) -> None:
    """Put ``old`` (``kept`` of the table replaced) back on the table now named ``name``, in the
    caller's transaction.  What names a column the new table lacks is refused in one line (the
    caller's transaction then leaves the old table in place): column comments and grants of a
    column no longer released are gone with it."""
    has = {r[0] for r in con.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped",
        [regclass_text(name)]).fetchall()}
    target = ident(name)
    steps: list[tuple[str, str, pgsql.Composable]] = list(old.statements)
    steps += [("NOT NULL on column", c, pgsql.SQL("ALTER TABLE {} ALTER COLUMN {} SET NOT NULL").format(
        target, pgsql.Identifier(c))) for c in old.not_null if c in has]
    steps += [("comment on column", c, pgsql.SQL("COMMENT ON COLUMN {} IS {}").format(
        pgsql.Identifier(*name.parts, c), pgsql.Literal(text))) for c, text in old.column_comments if c in has]
    steps += [("grant on column", c, pgsql.SQL("GRANT {} ({}) ON {} TO {}{}").format(
        pgsql.SQL(privilege), pgsql.Identifier(c), target,
        pgsql.SQL("PUBLIC") if grantee is None else pgsql.Identifier(grantee),
        pgsql.SQL(" WITH GRANT OPTION" if grantable else ""))) for c, grantee, privilege, grantable in old.column_grants
        if c in has]
    if old.options:
        settings = pgsql.SQL(", ").join(pgsql.SQL("{} = {}").format(pgsql.SQL(k), pgsql.Literal(v))
                                        for k, v in old.options)
        steps.append(("storage parameters", ", ".join(k for k, _ in old.options),
                      pgsql.SQL("ALTER TABLE {} SET ({})").format(target, settings)))
    for on, clause in zip(old.row_security, ("ENABLE", "FORCE")):
        if on:
            steps.append(("row security", clause.lower(), pgsql.SQL("ALTER TABLE {} {} ROW LEVEL SECURITY").format(
                target, pgsql.SQL(clause))))
    for what, label, statement in steps:
        try:
            with con.transaction():  # a savepoint: the error is named below, the outer transaction aborts
                con.execute(statement)
        except psycopg.Error as e:
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise OutputError(f"{flag} would lose the {what} {label!r} of {name.text!r}, which cannot be put on the "
                              f"new release ({reason}); drop it first, or release the columns it needs") from None


def replace_view(con: psycopg.Connection[Any], name: Name, create: Callable[[], None]) -> None:
    """Replace the view ``name`` by what ``create`` makes: in place (``CREATE OR REPLACE VIEW``, which
    keeps everything hung on it) when the new columns extend the old ones, else dropped and created
    again with its owner, comment and grants put back (refused when other views depend on it)."""
    try:
        with con.transaction():  # a savepoint: a refused in-place replacement leaves nothing behind
            create()
        return
    except psycopg.errors.InvalidTableDefinition:
        pass  # its columns changed (a policy with suppression adds deid_suppressed, one without drops it)
    refuse_dependents(con, name, "view", "--overwrite")
    props = properties(con, name)
    con.execute(pgsql.SQL("DROP VIEW {}").format(ident(name)))
    create()
    put_properties(con, name, props, "VIEW")


def swap_in(con: psycopg.Connection[Any], staging: Name, target: Name, flag: str) -> None:
    """Put the staging table in ``target``'s place, in the caller's transaction (see the module)."""
    existing = kind_of(con, target)
    if existing is None:
        con.execute(pgsql.SQL("ALTER TABLE {} RENAME TO {}").format(ident(staging), pgsql.Identifier(target.name)))
        return
    if existing == "table" and has_dependent_views(con, target):
        con.execute(pgsql.SQL("TRUNCATE {}").format(ident(target)))
        con.execute(pgsql.SQL("INSERT INTO {} SELECT * FROM {}").format(ident(target), ident(staging)))
        con.execute(pgsql.SQL("DROP TABLE {}").format(ident(staging)))
        return
    old: Kept | None = None
    if existing == "table":
        copy_properties(con, target, staging)
        old = kept(con, target)
        con.execute(pgsql.SQL("DROP TABLE {}").format(ident(target)))
    elif existing == "view":
        refuse_dependents(con, target, "view", flag)
        con.execute(pgsql.SQL("DROP VIEW {}").format(ident(target)))
    else:
        raise OutputError(f"the database has a {existing} named {target.text!r}; deid-sql replaces only tables and "
                          f"views: drop it first or pick another name")
    con.execute(pgsql.SQL("ALTER TABLE {} RENAME TO {}").format(ident(staging), pgsql.Identifier(target.name)))
    if old is not None:
        restore(con, target, old, flag)


def refuse_dependents(con: psycopg.Connection[Any], name: Name, kind: str, flag: str) -> None:
    """A table or view replaced by the other kind loses what depends on it: refused in one line."""
    if has_dependent_views(con, name):
        raise OutputError(f"{flag} would replace the {kind} {name.text!r} (by the other kind, or with other "
                          f"columns), but views depend on it; drop them first or pick another name")


def replace_table_by_view(con: psycopg.Connection[Any], target: Name) -> None:
    """``view --overwrite`` over a table: the table is dropped in the view's transaction (unless views
    depend on it)."""
    refuse_dependents(con, target, "table", "--overwrite")
    con.execute(pgsql.SQL("DROP TABLE {}").format(ident(target)))


def lock_to_owner(con: psycopg.Connection[Any], name: Name) -> None:
    """Leave the table ``name`` readable by its owner only: ``REVOKE ALL`` from PUBLIC and from every
    role its ACL names (a default privilege may have granted one on creation).  A view reads it
    with the view owner's privileges, so analysts granted a view never need the table."""
    con.execute(pgsql.SQL("REVOKE ALL ON {} FROM PUBLIC").format(ident(name)))
    grantees = con.execute(
        "SELECT DISTINCT pg_get_userbyid(a.grantee) FROM pg_class c, aclexplode(c.relacl) a "
        "WHERE c.oid = to_regclass(%s) AND a.grantee <> 0 AND a.grantee <> c.relowner",
        [regclass_text(name)]).fetchall()
    for (grantee,) in grantees:
        con.execute(pgsql.SQL("REVOKE ALL ON {} FROM {}").format(ident(name), pgsql.Identifier(grantee)))


def taken(kind: str, name: str, flag: str) -> OutputError:
    """The one line for an output name already in use, naming what it is and the flag that replaces it."""
    return OutputError(f"the database already has a {kind} named {name!r}; pick another name or pass {flag} to "
                       f"replace it")
