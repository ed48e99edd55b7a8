"""A key must be a secret (issue 38): ``secret_env = "PATH"`` let 19,980 of 19,981 pseudonyms be
reversed by computing HMAC with ``$PATH``.  Every command that reads a key refuses, in one line
with exit 2 and nothing written, a key read from a well-known variable, a short one, hex or
base64 too short once decoded, few distinct characters, words, or too little estimated entropy
(``deid_sql/contract/secret.py``); a random key always passes."""

from __future__ import annotations

import base64
import os
import secrets
import string
from pathlib import Path

import pytest

from deid_sql.contract.roles import ColumnRoles, parse_columns
from deid_sql.contract.secret import HINT, entropy_bits, key_problem, variable_problem
from deid_sql.errors import SpecError
from tests.test_roles import POLICY, PSEUDONYMIZE, SECRET_ENV, nothing_written, one_line

STRONG = "5c1f0a7e9b3d46e2a8f4c7b1d0e93a6f2b8c5d1e7f4a0b3c9d6e2f8a1b4c7d0e"

WEAK = {  # value: what the refusal says
    "short": "is 5 bytes; a key needs at least 32",
    "0123456789abcdef0123456789abcdef": "32 hex digits, which decode to 16 bytes",  # 32 bytes of text, 16 of key
    secrets.token_hex(16): "32 hex digits, which decode to 16 bytes",
    secrets.token_hex(31): "62 hex digits, which decode to 31 bytes",
    base64.b64encode(secrets.token_bytes(25)).decode(): "base64 of 36 characters, which decode to 25 bytes",
    "a" * 64: "only 1 distinct characters",
    "ab" * 40: "only 2 distinct characters",
    "0101100111010001011101000101110100101110100101001011": "only 2 distinct characters",
    "Tr0ub4dor&3" * 4: "estimated entropy of",
    "abcdefghijklmnopqrstuvwxyz0123456789ABCDEF": "estimated entropy of",
    "qwertyuiopasdfghjklzxcvbnm1234567890QWERTYUIOP": "estimated entropy of",
    "0123456789" * 5: "estimated entropy of",
    "Xk9#mQ2!vB7$" * 4: "estimated entropy of",
    "correct horse battery staple correct horse battery": "reads as words",
    "thisismysupersecretkeyforthedeidentificationrelease": "reads as words",
    "deid-sql persons test key, 32+ bytes long": "reads as words",
    "Password1234Password1234Password1234": "reads as words",
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin": "reads as words",  # $PATH's value
}


@pytest.mark.parametrize("value", list(WEAK), ids=[f"weak{i}" for i in range(len(WEAK))])
def test_a_key_that_is_no_secret_is_refused_with_how_to_make_one(value: str) -> None:
    line = key_problem("DEID_SECRET", value)
    assert line is not None and WEAK[value] in line, line
    assert HINT in line and "\n" not in line
    assert value not in line  # the refusal never prints the key


def test_hex_is_judged_decoded_64_digits_pass_32_do_not() -> None:
    assert key_problem("K", secrets.token_hex(32)) is None
    assert key_problem("K", secrets.token_hex(32).upper()) is None
    assert "decode to 16 bytes" in str(key_problem("K", secrets.token_hex(16)))
    assert entropy_bits("0123456789abcdef" * 4) < 128 < entropy_bits(STRONG)


@pytest.mark.parametrize("make", [
    lambda: secrets.token_hex(32),
    lambda: secrets.token_urlsafe(32),
    lambda: base64.b64encode(secrets.token_bytes(32)).decode(),
    lambda: "".join(secrets.choice(string.ascii_letters + string.digits + string.punctuation) for _ in range(40)),
], ids=["token_hex", "token_urlsafe", "base64", "printable"])
def test_random_keys_always_pass(make) -> None:  # noqa: ANN001
    refused = [(k, key_problem("K", k)) for k in (make() for _ in range(300))]
    assert [r for r in refused if r[1] is not None] == []


@pytest.mark.parametrize("name", ["PATH", "HOME", "USER", "SHELL", "PWD", "LANG", "TERM", "LOGNAME", "HOSTNAME",
                                  "TMPDIR", "EDITOR", "DISPLAY", "PYTHONPATH", "VIRTUAL_ENV", "LC_ALL", "lc_ctype",
                                  "path", "XDG_RUNTIME_DIR", "JAVA_HOME", "LD_LIBRARY_PATH", "SSH_AUTH_SOCK",
                                  "DEID_SQL_CACHE_DIR"])
def test_a_well_known_variable_is_refused_when_the_spec_is_read(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    problems: list[str] = []
    parse_columns({"pseudonymize": ["patient_id"], "secret_env": name}, problems)
    assert len(problems) == 1 and f"secret_env = {name!r} names a well-known environment variable" in problems[0]
    assert variable_problem(name) == problems[0]
    monkeypatch.setenv(name, STRONG)  # whatever it holds: its value is no secret
    with pytest.raises(SpecError, match="well-known"):
        ColumnRoles(secret_env=name).secret()
    assert variable_problem("DEID_SECRET") is None and variable_problem("HOSPITAL_KEY") is None


def test_secret_env_path_is_refused_on_the_command_line(project, run, tmp_path: Path) -> None:
    """The attack of the issue: ``secret_env = "PATH"`` (set on every machine) released pseudonyms
    anyone could reverse; now validate and every release refuse it, nothing written."""
    assert os.environ.get("PATH")
    spec = project.spec(columns=PSEUDONYMIZE.replace(SECRET_ENV, "PATH"))
    before, outside = project.files(), sorted(p.name for p in tmp_path.iterdir())
    for args in (("validate", spec), ("materialize", spec, "-p", POLICY, "--out", tmp_path / "out.parquet"),
                 ("report", spec, "-p", POLICY, "--out", tmp_path / "report.html")):
        line = one_line(run(*args, expect=2))
        assert "secret_env = 'PATH' names a well-known environment variable" in line, args
    nothing_written(project, tmp_path, before, outside)


@pytest.mark.parametrize("value", ["0123456789abcdef0123456789abcdef", "a" * 64,
                                   "correct horse battery staple correct horse battery"])
@pytest.mark.parametrize("command", ["validate", "materialize", "report", "apply"])
def test_every_command_that_reads_the_key_refuses_a_weak_one(project, run, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch, value: str,
                                                             command: str) -> None:
    spec = project.spec(columns=PSEUDONYMIZE)
    if command == "apply":  # a policy saved under a good key, applied to a batch under a weak one
        monkeypatch.setenv(SECRET_ENV, STRONG)
        saved = tmp_path / "policy.json"
        run("policy", "save", spec, "-p", POLICY, "--out", saved)
    monkeypatch.setenv(SECRET_ENV, value)
    before, outside = project.files(), sorted(p.name for p in tmp_path.iterdir())
    args = {"validate": ("validate", spec),
            "materialize": ("materialize", spec, "-p", POLICY, "--out", tmp_path / "out.parquet"),
            "report": ("report", spec, "-p", POLICY, "--out", tmp_path / "report.html"),
            "apply": ("apply", tmp_path / "policy.json", "--source", project.dir / "source.parquet", "--out",
                      tmp_path / "out.parquet")}[command]
    line = one_line(run(*args, expect=2))
    assert f"the key in {SECRET_ENV}" in line and HINT in line and value not in line
    nothing_written(project, tmp_path, before, outside)


@pytest.mark.slow  # imports dbt
def test_the_dbt_plugin_refuses_a_weak_key(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("dbt.adapters.duckdb")
    from deid_sql.backends.dbt_duckdb import secret_of

    monkeypatch.setenv("DEID_DBT_KEY", "0123456789abcdef0123456789abcdef")
    with pytest.raises(SpecError, match="decode to 16 bytes"):
        secret_of("DEID_DBT_KEY")
    with pytest.raises(SpecError, match="well-known"):
        secret_of("HOME")
    monkeypatch.setenv("DEID_DBT_KEY", STRONG)
    assert secret_of("DEID_DBT_KEY") == STRONG.encode()
