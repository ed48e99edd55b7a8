"""Policies and the lattice they form (seed 000 §3.2), their text, and full-domain levels.

A policy is a bit-string per QI; the lattice orders them; the text forms (``zip:digits=3``,
``age:every=10``) are read and written in one place (``text``); ``levels`` reads a full-domain
level vector (seed 004).  No data, no SQL: a policy becomes a ``Recoding`` (``deid_sql.domains``).

Modules:

- ``lattice.py``: ``Policy`` (one bit-string per QI, a bit per boundary kept; immutable, hashable) and the
  policy lattice (seed 000 Defs 3.3–3.6): order, parents/children, chains, halfway
  points, sublattices; with allowed cut points the sublattice of publishable policies
- ``levels.py``: full-domain levels of a QI and the level-vector text ``sex:0|age:3``: one reading for the
  full-domain search and every ``--levels``
- ``text.py``: the policy text of one QI a person writes and reads (``zip:digits=3``, ``age:every=10``, ``top``, …):
  ``parse_qi``/``format_qi``, and ``segments``, the only place a policy text is split (``lattice.py``'s
  ``parse_release`` reads a whole release text with it)

May import: ``domains``, ``errors``.
Imported by: ``cli``, ``evaluate``, ``fulldomain``, ``jobs``, ``policyfile``, ``problem``, ``release``,
    ``search``, ``starter``.
"""
