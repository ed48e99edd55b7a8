"""The release: what one release releases, whether it may leave, and how it is written and recorded.

``plan`` resolves what is released (``ReleasePlan``, the one input of every release path);
``figures`` measures the rows written, ``gate`` judges them against ``[release]``, ``sidecar``
records them; ``output`` writes files, tables and views atomically and row-counted, ``targets``
checks an output before any data is read, ``records`` keeps compiled SQL with its record and
verifies a release against it.  Safe Harbor (``safe_harbor``) is the fixed recipe every release
is compared with.  The declarations it judges against are ``deid_sql.contract``.

Modules:

- ``attribute.py``: what sensitive values reveal on the rows written: one ``GROUP BY`` (labels, value) per
  sensitive column with an attribute criterion, q(v) from the source, judged with ``evaluate.attribute``
  (``measure_column``); refusals name the column, the worst group's labels and the figure; over a set, a
  linked table's sensitive column counted per person by one ``GROUP BY`` joining its rows to the person
  source's release by the person key (``LinkedValues``, ``linked_value_query``), judged once per set
- ``cell_figures.py``: the judgment before a write from the source's cells (``prejudged``): the groups the
  release query would count, rolled up from the cells with the suppression applied, so the source is read
  once; None where cells cannot count the release (persons, a derived ``rows`` QI, attribute criteria)
- ``constraint.py``: the attribute criteria as a constraint of the lattice searches (``AttributeConstraint``):
  a policy's groups and f_G(v) from the sensitive cells (``loading.sensitive``), judged by ``attribute.py``'s own
  judgement; feasibility cached per policy, a chain's feasible prefix by bisection (monotone, decision 15)
- ``figures.py``: a release's figures from one ``GROUP BY`` over the rows written (``measure``); ``Census``,
  the people of released label tuples through ``groups.py``; ``cell_groups``
- ``gate.py``: ``build_gate(ReleaseSource, plan, call, accept_risk)``, the one gate builder; ``ReleaseGate``
  (original-data rule, criteria, ``--accept-risk``, the sidecar's content), ``Verdict``
- ``output.py``: materialize (Parquet/CSV/DuckDB/engine table), views and compiled SQL of a ``ReleasePlan``,
  gated, atomic and row-count checked; ``write_query`` for any row-preserving query
- ``plan.py``: ``ReleasePlan`` (recoding, text, readable form, suppression, level vector) and ``plan_of``,
  the one resolver of what a release releases
- ``recorded.py``: a release's record as the ledger knows it: its hash (``record_sha256``), and whether the
  ledger still holds the entry it names (``recorded_problems``: the last entries removed are found so)
- ``records.py``: compiled SQL kept with its sidecar (``write_compiled``), and a release checked against its
  record (``verify_release``: a file by its hash, a table by its row hash, a set's folder file by file,
  holding nothing its record does not list)
- ``safe_harbor.py``: HIPAA Safe Harbor as a ``Recoding`` built from the QIs' roles;
  ``safe_harbor_metrics``, once per problem
- ``sidecar.py``: the JSON record beside a release: ``<file>.release.json`` or a ``<name>__release`` table;
  hashes, time, reading it back
- ``targets.py``: what a command will write (``Target``), checked before any data is read, in the words the
  write would use; a set's table names (``set_names``: ``PREFIX`` + release name, the record ``PREFIX`` +
  ``release``)
- ``union.py``: a release judged with what its recipient already holds (METHODS decision 16): the persons'
  label tuples of the rows written (``released_persons``), their combined labels with the earlier releases
  in the ledger (``union_figures``: k, uniques, risks, g from the intersections of the label regions),
  where a linkable release is recorded (``LedgerPlan``)
- ``written.py``: a written table measured once (``measure_written``): the gate's figures and the table's
  row hash summed per released group in one ``GROUP BY``
- ``unit.py``: ``Unit``: what the figures count in words (records, or persons with ``[person]``), for the
  gate's refusals and the report's sentences; machine keys stay

May import: ``backends``, ``compiler``, ``contract``, ``domains``, ``errors``, ``evaluate``, ``invocation``,
    ``ledger``, ``loading``, ``policies``, ``problem``, ``progress``, ``spec``, ``sqltext``, ``storage``.
Imported by: ``channels``, ``cli``, ``dbt``, ``jobs``, ``policyfile``, ``report``, ``sets``, ``starter``.
"""
