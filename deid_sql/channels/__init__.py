"""Seed 003's channel expansion: confidential values protected by a linear program.

Counts input channels, solves the LP/MILP, rounds to whole subjects, releases and checks its own
rows; its verdict is the gate's ``Verdict``.  ``[channels]`` is registered from ``plugin``.

Modules:

- ``assignment.py``: assignments' metrics and safety; rounding to whole subjects and its repair
- ``candidates.py``: candidate output channels: d_0, seeded §7-rule draws, listed ones (eq. 5)
- ``inputs.py``: one ``GROUP BY related…, confidential`` → m_r^k per input channel; risky/safe by eqs. 2–4
- ``job.py``: end to end: load → solve (MILP or LP + rounding) → plan (``ChannelJob``)
- ``plugin.py``: registers the ``[channels]`` section (a spec holding it needs no ``[[qi]]``)
- ``program.py``: eqs. 11–16 as sparse matrices; LP and MILP by HiGHS via scipy
- ``release.py``: ``ChannelPlan`` (rank ranges per input channel), its ``SELECT`` (seeded hash rank) and the
  check joining released rows back
- ``spec.py``: the ``[channels]`` parser, every problem collected (scipy-free)
- ``write.py``: the release with its composition table and summary, all or nothing; ``channel_verdict``, the
  gate's ``Verdict`` from the channel checks

May import: ``backends``, ``compiler``, ``errors``, ``loading``, ``registry``, ``release``, ``spec``,
    ``storage``.
Imported by: ``cli``.
"""
