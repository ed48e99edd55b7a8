"""Baselines: earlier or brute-force versions of product code that the tests compare the product
with and the benchmarks measure it against.  They are not shipped (``tests/`` is no package of the
distribution); the benchmarks import them through ``bench/baselines.py``, which puts the
repository's root on ``sys.path``.

- ``chain_rekey.py``: the previous chain evaluator, re-keying the split interval's cells each step
  (``tests/test_chain_eval.py``, ``bench/frontier.py``);
- ``fulldomain.py``: the optimum by exhaustive enumeration of the full-domain transformations and
  the best-first search before inherited bounds (``tests/test_bfs.py``,
  ``tests/test_fulldomain_api.py``, ``bench/anonymize.py``).

They import only ``deid_sql``, never the tests' helpers, so the benchmarks can load them alone.
"""
