"""The release's judgement: what one release releases and whether it may leave.

``plan`` (``ReleasePlan``: the one input of every release path), ``figures`` (a release's risk
measured on what was written), ``gate`` (the one check every output path runs, built by
``gate.build_gate``) and ``sidecar`` (the JSON record beside every release).  The declarations
they judge against — criteria, column roles, pseudonyms — are ``deid_sql.contract``, below the
spec.  Nothing is imported here.
"""
