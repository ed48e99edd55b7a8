"""A dbt-duckdb plugin: the key's functions, registered on dbt's connection from its environment.

A dbt model of a set (``dbt/sets.py``) pseudonymizes the person key and shifts dates, but a model
file is stored, so it may not hold the key (nor its HMAC pads).  It calls ``deid_pseudonym``,
``deid_pseudonym_int`` and ``deid_shift_offset`` (``contract.keys.Udfs``) instead; this plugin
registers them on every connection dbt opens, computed by the pure-Python references
(``contract.pseudonym.pseudonym``, ``contract.shift.offset``) with the key read, at ``dbt run``
time, from the environment variable its config names.  In ``profiles.yml``::

    outputs:
      dev:
        type: duckdb
        path: warehouse.duckdb
        plugins:
          - module: deid_sql.backends.dbt_duckdb
            config: {secret_env: DEID_SECRET}

The only module of the package that imports dbt (dbt-duckdb loads it by name); NULL in is NULL
out (DuckDB's default null handling never calls the function with NULL).
"""

from __future__ import annotations

from typing import Any

from dbt.adapters.duckdb.plugins import BasePlugin
from duckdb import DuckDBPyConnection, sqltypes

from ..contract.keys import PSEUDONYM_HEX, PSEUDONYM_INTEGER, SHIFT_OFFSET
from ..contract.pseudonym import pseudonym
from ..contract.roles import ColumnRoles
from ..contract.shift import offset


def secret_of(env: Any) -> bytes:
    """The key in the environment variable ``env`` (the spec's ``secret_env``): missing, empty or no
    secret (``contract.secret``: a well-known variable, short, guessable) is one clear error, as for
    every release (``ColumnRoles.secret``)."""
    if not isinstance(env, str) or not env.strip():
        raise ValueError("deid_sql.backends.dbt_duckdb needs config: {secret_env: <environment variable holding the "
                         "key>} in the profile's plugins entry (the spec's [columns] secret_env)")
    return ColumnRoles(secret_env=env).secret()


def register(conn: DuckDBPyConnection, secret: bytes) -> None:
    """Register the three functions on ``conn`` under ``secret`` (the reference values)."""
    def hex_form(value: str) -> str:
        return str(pseudonym(secret, value, "hex"))

    def integer_form(value: str) -> int:
        return int(pseudonym(secret, value, "integer"))  # type: ignore[arg-type]

    def shift(value: str, days: int) -> int:
        moved = offset(secret, value, int(days))
        assert moved is not None
        return moved

    for name, fn, args, returns in ((PSEUDONYM_HEX, hex_form, [sqltypes.VARCHAR], sqltypes.VARCHAR),
                                    (PSEUDONYM_INTEGER, integer_form, [sqltypes.VARCHAR], sqltypes.BIGINT),
                                    (SHIFT_OFFSET, shift, [sqltypes.VARCHAR, sqltypes.INTEGER], sqltypes.INTEGER)):
        try:
            conn.remove_function(name)
        except Exception:  # noqa: BLE001 - not registered yet (DuckDB raises InvalidInputException)
            pass
        conn.create_function(name, fn, args, returns)


class Plugin(BasePlugin):
    """Reads ``secret_env`` from the plugin's config; registers the functions per connection."""

    def initialize(self, plugin_config: dict[str, Any]) -> None:
        self.secret_env = plugin_config.get("secret_env")
        secret_of(self.secret_env)  # a missing or weak key fails when dbt starts, before any model runs

    def configure_connection(self, conn: DuckDBPyConnection) -> None:
        register(conn, secret_of(self.secret_env))  # read at dbt run time, never stored


__all__ = ["Plugin", "register", "secret_of"]
