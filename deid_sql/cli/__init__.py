"""The ``deid-sql`` command line (click): thin commands over the library, loaded when they run.

Modules:

- ``adversary.py``: ``adversary``
- ``anonymize.py``: ``anonymize``
- ``channels.py``: ``channels``
- ``dbt.py``: ``dbt``
- ``demo.py``: ``demo``
- ``failures.py``: the error boundary: every failure as one line and an exit code (click only)
- ``frontier.py``: ``frontier``
- ``help.py``: ``help [TOPIC]``: the topic pages shipped in ``deid_sql/topics/*.md`` (package data), the
  vocabulary, a command's --help
- ``init.py``: ``init``
- ``inspect.py``: ``validate``, ``evaluate``
- ``ledger.py``: ``ledger``: what each recipient already holds, and the ledger's hash chain checked
- ``main.py``: the root group: adds every command to ``registry.COMMANDS`` (module and one-line summary),
  imports a command only when it runs; ``main``
- ``options.py``: shared options; ``release_plan`` (the CLI's one ``plan_of`` call), ``open_problem``,
  ``RegisteredChoice`` (choices from a registry), ``renamed`` (an old option spelling: hidden, one
  deprecation line), ``reports_wall_time`` (a command's last line)
- ``output.py``: ``compile``, ``materialize``, ``view``
- ``output_sets.py``: ``view`` of a spec that links tables: the set's views (``sets.views``)
- ``policy.py``: ``policy save``, ``apply``, ``check``
- ``report.py``: ``report``, and ``--report`` of the release commands
- ``search.py``: ``safe-harbor``, ``alternatives``
- ``vocabulary.py``: what each option name means on every command (``MEANINGS``, held to the command tree by
  tests/test_vocabulary.py)

May import: ``adversary``, ``backends``, ``channels``, ``compiler``, ``dbt``, ``domains``, ``errors``,
    ``evaluate``, ``interrupts``, ``invocation``, ``jobs``, ``ledger``, ``nocensus``, ``policies``, ``policyfile``,
    ``problem``, ``progress``, ``registry``, ``release``, ``report``, ``search``, ``sets``, ``spec``,
    ``starter``, ``storage``.
Imported by: nothing of deid_sql.
"""

from .main import cli, main

__all__ = ["cli", "main"]
