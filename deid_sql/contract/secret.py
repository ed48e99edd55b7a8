"""Keys that are secrets: the one check of every key deid-sql reads (``[columns] secret_env``).

A pseudonym is HMAC-SHA-256 of a value under the key, and a person's date offset is derived from
the same key (``pseudonym``, ``shift``).  Whoever has the key, or can guess it, hashes every
possible identifier and reverses every pseudonym and every shift: a key read from ``$PATH``
reversed 19,980 of 19,981 pseudonyms.  So a key is refused, in one line that names the variable
and the rule and says how to make a key, when

- **the variable is a well-known one** (``WELL_KNOWN``: ``PATH``, ``HOME``, ``USER``, ``SHELL``, ``PWD``,
  ``LANG``, ``TERM``, ``LOGNAME``, ``HOSTNAME``, ``TMPDIR``, ``EDITOR``, ``DISPLAY``, ``PYTHONPATH``,
  ``VIRTUAL_ENV``, … and the families ``LC_*``, ``XDG_*``, ``SSH_*``, ``SUDO_*``, ``CONDA_*``, ``*_HOME``,
  ``*PATH``; names compared in capitals): its value is printed by ``env``, kept in logs and the same
  on every colleague's machine.  Checked when the spec is read, before any key is;
- **it is shorter than 32 bytes** (``MIN_KEY_BYTES``, UTF-8): ``secrets.token_hex(32)`` makes 64;
- **it is hex or base64 that decodes to fewer than 32 bytes**: text of hex digits only (with at least
  one letter a-f) carries half a byte a character, so 64 hex digits pass and 32 (16 bytes) do not;
  padded base64 (ending in ``=``) carries what it decodes to;
- **it has fewer than 10 distinct characters** (``MIN_DISTINCT``): one character class, few symbols;
- **its estimated entropy is below 128 bits** (``MIN_BITS``): the key is read left to right, and a
  repeat of earlier text, a run (``aaaa``, ``abcd``, ``4321``, a keyboard row such as ``qwerty``) or a
  dictionary word of three letters or more counts as one symbol, every other character as one;
  the estimate is symbols × log2(alphabet), the alphabet being 16 for hex text and otherwise the
  classes the key uses (26 lowercase, 26 uppercase, 10 digits, 33 ASCII punctuation and space, 100
  more for any other character).  64 random hex digits estimate at about 250 bits, 43 random
  base64 characters (``secrets.token_urlsafe(32)``) at about 250, ``"a" * 64`` at 9;
- **it reads as words**: half of its characters or more are dictionary words of three letters or
  more (``words.txt``: the words of the methods papers and the docs, everyday English and words
  common in passwords), a passphrase however long.

Random keys pass every rule: the rules are tuned so that a key made by ``secrets.token_hex(32)``
or ``token_urlsafe(32)`` is never refused (``tests/test_secret_keys.py`` tries thousands).
"""

from __future__ import annotations

import base64
import binascii
import math
import string
from functools import lru_cache
from importlib import resources

MIN_KEY_BYTES = 32
MIN_DISTINCT = 10
MIN_BITS = 128
MIN_RUN = 3  # the shortest repeat, run or dictionary word that counts as one symbol
HINT = 'python -c "import secrets; print(secrets.token_hex(32))"'

#: variables whose value is no secret: set by the system, the shell, a terminal or a tool, printed
#: by ``env`` and the same on many machines (compared in capitals; the families are below)
WELL_KNOWN = frozenset({
    "PATH", "HOME", "USER", "USERNAME", "LOGNAME", "SHELL", "PWD", "OLDPWD", "LANG", "LANGUAGE", "TERM",
    "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "COLORTERM", "HOSTNAME", "HOST", "HOSTTYPE", "OSTYPE", "MACHTYPE",
    "TMPDIR", "TMP", "TEMP", "EDITOR", "VISUAL", "PAGER", "BROWSER", "DISPLAY", "WAYLAND_DISPLAY", "MAIL",
    "SHLVL", "PS1", "PS2", "PS4", "PROMPT_COMMAND", "HISTFILE", "HISTSIZE", "HISTFILESIZE", "HISTCONTROL", "TZ",
    "COLUMNS", "LINES", "UID", "EUID", "PPID", "_", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED", "VIRTUAL_ENV", "VIRTUAL_ENV_PROMPT", "PIP_INDEX_URL",
    "DBUS_SESSION_BUS_ADDRESS", "GPG_TTY", "CI", "TRAVIS", "JENKINS_URL", "GITHUB_ACTIONS", "SESSION_MANAGER",
    "DESKTOP_SESSION", "WINDOWID", "LS_COLORS", "LSCOLORS", "GREP_COLORS", "MOTD_SHOWN", "INVOCATION_ID",
    "JOURNAL_STREAM", "USERPROFILE", "HOMEDRIVE", "APPDATA", "LOCALAPPDATA", "PROGRAMDATA", "PROGRAMFILES",
    "SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "COMPUTERNAME", "USERDOMAIN", "OS", "PROCESSOR_ARCHITECTURE",
    "PROCESSOR_IDENTIFIER", "NUMBER_OF_PROCESSORS", "PUBLIC", "ALLUSERSPROFILE", "PYSPARK_PYTHON",
    # deid-sql's own settings (docs: the cache folder, progress, tracebacks, Spark's folder)
    "DEID_SQL_CACHE_DIR", "DEID_SQL_PROGRESS", "DEID_SQL_NO_CACHE", "DEID_SQL_TRACEBACK", "DEID_SQL_SPARK_HOME",
})
WELL_KNOWN_PREFIXES = ("LC_", "XDG_", "SSH_", "SUDO_", "CONDA_", "GIT_", "NVM_", "PYENV_")
WELL_KNOWN_SUFFIXES = ("_HOME", "PATH")

_HEX = frozenset(string.hexdigits)
_BASE64 = frozenset(string.ascii_letters + string.digits + "+/-_")
_PUNCTUATION = frozenset(string.punctuation + " ")
_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm", "1234567890", "qwertzuiop", "azertyuiop", "yxcvbnm")


def variable_problem(name: str) -> str | None:
    """Why the environment variable ``name`` cannot hold a key (a well-known one), or None."""
    upper = name.strip().upper()
    if upper in WELL_KNOWN or upper.startswith(WELL_KNOWN_PREFIXES) or upper.endswith(WELL_KNOWN_SUFFIXES):
        return (f"[columns] secret_env = {name!r} names a well-known environment variable, whose value is no "
                f"secret (anyone can read or guess it, and so reverse every pseudonym and date shift); keep "
                f"the key in a variable of its own, e.g. secret_env = \"DEID_SECRET\" with "
                f"export DEID_SECRET=$({HINT})")
    return None


def key_problem(name: str, value: str) -> str | None:
    """Why the text ``value`` of the variable ``name`` is no secret key (the rules above), or None.
    The line never quotes the key."""
    refused = variable_problem(name)
    if refused is not None:
        return refused
    how = f"make one with export {name}=$({HINT}) (the same key for every batch)"
    size = len(value.encode("utf-8"))
    if size < MIN_KEY_BYTES:
        return f"the key in {name} is {size} bytes; a key needs at least {MIN_KEY_BYTES} random bytes: {how}"
    decoded = _decoded_size(value)
    if decoded is not None and decoded[1] < MIN_KEY_BYTES:
        form, length = decoded
        return (f"the key in {name} is {form}, which decode to {length} bytes; a key needs at least "
                f"{MIN_KEY_BYTES} random bytes ({2 * MIN_KEY_BYTES} hex digits): {how}")
    distinct = len(set(value))
    if distinct < MIN_DISTINCT:
        return (f"the key in {name} has only {distinct} distinct characters, too few to be random (at least "
                f"{MIN_DISTINCT}): {how}")
    covered = word_share(value)
    if covered >= 0.5:
        return (f"the key in {name} reads as words ({covered:.0%} of it is dictionary words), which are "
                f"guessed first, however long the phrase; a key must be random: {how}")
    bits = entropy_bits(value)
    if bits < MIN_BITS:
        return (f"the key in {name} has an estimated entropy of {bits:.0f} bits (repeats, runs, keyboard rows "
                f"and words counted once), below the {MIN_BITS} a key needs: {how}")
    return None


def entropy_bits(value: str) -> float:
    """The key's estimated entropy in bits: its symbols (a repeat, run or word counting as one) times
    log2 of its alphabet's size."""
    return len(_symbols(value)) * math.log2(alphabet_size(value))


def alphabet_size(value: str) -> int:
    """16 for hex text; otherwise the sizes of the character classes ``value`` uses."""
    if _is_hex(value):
        return 16
    size = 0
    for chars, n in ((string.ascii_lowercase, 26), (string.ascii_uppercase, 26), (string.digits, 10),
                     (_PUNCTUATION, 33)):
        if any(c in chars for c in value):
            size += n
    if any(not c.isascii() for c in value):
        size += 100
    return max(size, 2)


def word_share(value: str) -> float:
    """The share of ``value``'s characters that lie in dictionary words of ``MIN_RUN`` letters or more
    (the longest word at each place, read left to right)."""
    if not value:
        return 0.0
    covered = 0
    i = 0
    while i < len(value):
        n = _word_at(value, i)
        if n:
            covered += n
            i += n
        else:
            i += 1
    return covered / len(value)


def _symbols(value: str) -> list[str]:
    """``value`` read left to right as symbols: the longest repeat of earlier text, run, keyboard-row
    stretch or dictionary word (each ``MIN_RUN`` characters or more) is one symbol, else one character."""
    out = []
    i = 0
    while i < len(value):
        n = max(_repeat_at(value, i), _run_at(value, i), _row_at(value, i), _word_at(value, i))
        step = n if n >= MIN_RUN else 1
        out.append(value[i:i + step])
        i += step
    return out


def _repeat_at(value: str, i: int) -> int:
    """The length of the longest text starting at ``i`` that also starts earlier (overlaps allowed)."""
    best = 0
    for j in range(i):
        n = 0
        while i + n < len(value) and value[j + n] == value[i + n]:
            n += 1
        best = max(best, n)
    return best


def _run_at(value: str, i: int) -> int:
    """The length of the run starting at ``i``: characters whose code points step by 0, +1 or -1."""
    if i + 1 >= len(value):
        return 1
    step = ord(value[i + 1]) - ord(value[i])
    if step not in (-1, 0, 1):
        return 1
    n = 2
    while i + n < len(value) and ord(value[i + n]) - ord(value[i + n - 1]) == step:
        n += 1
    return n


def _row_at(value: str, i: int) -> int:
    """The length of the keyboard-row stretch (either direction) starting at ``i``."""
    text = value.lower()
    best = 0
    for row in _ROWS:
        for line in (row, row[::-1]):
            start = line.find(text[i]) if i < len(text) else -1
            if start < 0:
                continue
            n = 0
            while i + n < len(text) and start + n < len(line) and text[i + n] == line[start + n]:
                n += 1
            best = max(best, n)
    return best


def _word_at(value: str, i: int) -> int:
    """The length of the longest dictionary word (``MIN_RUN`` letters or more, any case) starting at ``i``."""
    words, longest = _dictionary()
    text = value.lower()
    for n in range(min(longest, len(text) - i), MIN_RUN - 1, -1):
        if text[i:i + n] in words:
            return n
    return 0


@lru_cache(maxsize=1)
def _dictionary() -> tuple[frozenset[str], int]:
    lines = resources.files(__package__).joinpath("words.txt").read_text(encoding="utf-8").splitlines()
    words = frozenset(w.strip().lower() for w in lines if w.strip() and not w.startswith("#"))
    return words, max(map(len, words))


def _is_hex(value: str) -> bool:
    """Hex digits only, with at least one letter (digits alone are judged as digits)."""
    return bool(value) and set(value) <= _HEX and any(c.isalpha() for c in value)


def _decoded_size(value: str) -> tuple[str, int] | None:
    """(what it is, bytes it decodes to) for hex text or padded base64, else None."""
    if _is_hex(value):
        return f"{len(value)} hex digits", len(value) // 2
    body = value.rstrip("=")
    if value.endswith("=") and len(value) % 4 == 0 and body and set(body) <= _BASE64:
        try:
            decoded = base64.b64decode(value.replace("-", "+").replace("_", "/"), validate=True)
        except (binascii.Error, ValueError):
            return None
        return f"base64 of {len(value)} characters", len(decoded)
    return None


__all__ = ["HINT", "MIN_BITS", "MIN_DISTINCT", "MIN_KEY_BYTES", "WELL_KNOWN", "alphabet_size", "entropy_bits",
           "key_problem", "variable_problem", "word_share"]
