"""Policies and the lattice they form (seed 000 §3.2), their text, and full-domain levels.

A policy is a bit-string per QI; the lattice orders them; the text forms (``zip:digits=3``,
``age:every=10``) are read and written in one place (``text``); ``levels`` reads a full-domain
level vector (seed 004).  No data, no SQL: a policy becomes a ``Recoding`` (``deid_sql.domains``).

Modules:

- ``lattice.py``: the policy lattice (seed 000 Defs 3.3–3.6): order, parents/children, chains, halfway
  points, sublattices; with allowed cut points the sublattice of publishable policies
- ``levels.py``: full-domain levels of a QI and the level-vector text ``sex:0|age:3``: one reading for the
  full-domain search and every ``--levels``
- ``policy.py``: a policy: one bit-string per QI, a bit per boundary kept (seed 000 §3.2); immutable,
  hashable
- ``text.py``: the policy text a person writes and reads (``zip:digits=3``, ``age:every=10``, ``top``, …):
  ``parse_qi``/``format_qi``, and ``segments``/``parse_release``, the only place a policy text is split

May import: ``domains``, ``errors``.
Imported by: ``cli``, ``evaluate``, ``fulldomain``, ``jobs``, ``policyfile``, ``problem``, ``release``,
    ``search``, ``starter``.
"""
