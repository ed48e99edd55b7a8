"""A release plan as a dbt model over ``{{ source() }}``, with tests, label macros and a sidecar.

``write_dbt(problem, plan, project)`` (``model.py``) writes into a dbt project folder (creating a
minimal ``dbt_project.yml`` when there is none, never replacing one):

- ``models/<model>.sql``: ``{{ config(materialized=...) }}``, the run-time refusal to build
  over one of its inputs (``inputs.guard``), and the generalizing ``SELECT`` rendered for the
  target dialect, its source table replaced by ``{{ source('<source>', '<table>') }}``;
- ``models/<model>.yml``: the model with the policy, rules, risk, loss, KL and k in
  ``meta``, and its tests: same row count as the source, every QI value one of the
  policy's labels, and (with ``k``) no group of the QIs smaller than k;
- ``models/deid_sql_source__<source>__<table>.yml``: the source (shared by models over it);
- ``macros/deid_sql_tests.sql``: the generic tests and ``deid_sql_refuse_inputs`` (shared;
  identical for every model);
- ``macros/deid_sql_labels__<model>.sql``: per QI a generic test holding every label the
  policy can give that QI (its groups' labels; a value kept alone is its own label) as
  SQL literals of the dialect.  The labels live in a macro file, not in the yml, so the
  yml stays small whatever the domain (a ZIP kept at 5 digits has one label per ZIP),
  labels are never re-typed by YAML or rendered as Jinja by dbt, and no seed has to be
  loaded before ``dbt test``.

A model named like one of its inputs (the source, the census, a table of the set) in the
profile's schema is refused before anything is computed (``inputs.refuse_replacing``): ``dbt run``
would replace the input with the release.  Everything is computed and checked first; then the
files are written to temporary siblings and renamed together, so a failure writes nothing.
Writing needs no dbt.

Modules:

- ``files.py``: the files' text: model SQL, label-test macros, model/source/project yml, generic tests
- ``inputs.py``: the tables a model must never replace (its sources, the census): refused when the files are
  written (``refuse_replacing``) and, where the schema is known only then, at ``dbt run`` time by the macro
  every model calls first (``guard``)
- ``ledger_check.py``: a set's person model tested against its ledger entry (the recipient's persons per label
  tuple, their least and greatest pseudonym): ``dbt test`` fails when the data changed past the judged entry
- ``model.py``: ``write_dbt``: a ``ReleasePlan`` judged by ``build_gate``, then every file computed and
  written all or nothing
- ``project.py``: the project folder: paths from ``dbt_project.yml``, what is in the way, ``write_all``
- ``sets.py``: ``write_dbt_set``: a set of linked tables as one model per table (linked models joining the
  person model by ``ref``), judged once by ``build_gate(whole_set=True)``, a profile with the key's plugin,
  one sidecar; no key in any file
- ``text.py``: Jinja-safe text, the ``{{ source() }}`` splice, a small YAML writer

May import: ``backends``, ``compiler``, ``contract``, ``domains``, ``errors``, ``evaluate``, ``loading``,
    ``problem``, ``release``, ``sets``, ``spec``, ``sqltext``, ``storage``.
Imported by: ``cli``.
"""

from .files import MATERIALIZATIONS, SENTINEL, dbt_dialect
from .model import DEFAULT_PROFILE, DEFAULT_SOURCE, DbtOutput, write_dbt
from .text import jinja_text, splice_source, yaml_dump

__all__ = ["DEFAULT_PROFILE", "DEFAULT_SOURCE", "MATERIALIZATIONS", "SENTINEL", "DbtOutput", "dbt_dialect",
           "jinja_text", "splice_source", "write_dbt", "yaml_dump"]
