"""Seed 002's economic attacker as a factored MDP, solved exactly.

Its ``[adversary]`` section and ``adversary`` risk model are registered from ``plugin``.

Modules:

- ``assess.py``: a release's per-group risk under the attacker, with any solver
- ``dp.py``: exact backward induction over every cluster size at once, vectorized; pruning by the falling
  start value
- ``lp.py``: the plain and Two-Level LPs (HiGHS via scipy); P_reid by eq. 3.5 on the chain
- ``model.py``: the factored MDP of seed 002 §3.3: states (Table 3.1), actions, rewards, eq. 3.3/3.4
  probabilities, beliefs
- ``params.py``: the attacker's economics, checked, with the case study's defaults; the ``[adversary]``
  parser (scipy-free)
- ``plugin.py``: registers the ``[adversary]`` section and the ``adversary`` risk model
- ``risk.py``: ``AdversaryRisk`` (P_reid × loss per g) for the evaluators; thresholds k/k′, eq. 3.7
  baseline, monotonicity check
- ``sensitivity.py``: the Fig. 3.9 sweep of thresholds against the deterrents, as CSV and PNG
- ``solvers.py``: ``PlainLP``, ``TwoLevelLP``, ``DPSolver`` behind one interface (``make_solver``)
- ``space.py``: sink-cluster states enumerated with closed-form indices, for the LPs

May import: ``errors``, ``registry``, ``spec``, ``storage``.
Imported by: ``cli``, ``report``.
"""
