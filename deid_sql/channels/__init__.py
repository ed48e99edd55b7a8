"""Channel expansion (seed 003): protect confidential values while identities stay.

The ``[channels]`` table of a spec is read and checked by ``spec``.  Input channels
(combinations of confidentiality-related values) are counted by one ``GROUP BY`` in
the backend (``inputs``); risky ones are pooled with safe ones into candidate output
channels (``candidates``); a linear program picks how many subjects of each input
channel go to each output channel (``program``: the LP, or HiGHS's MILP for whole
subjects); otherwise whole subjects come from rounding the LP and repairing it
(``assignment``); they are released by compiled SQL and checked (``release``) and
written with their composition table (``write``).  ``job.solve`` wires them together
into a ``ChannelJob`` for the CLI and the API.
"""
