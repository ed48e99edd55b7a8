"""Channel expansion (seed 003): protect confidential values while identities stay.

Input channels (combinations of confidentiality-related values) are counted by one
``GROUP BY`` in the backend (``inputs``); risky ones are pooled with safe ones into
candidate output channels (``candidates``); a linear program picks how many subjects
of each input channel go to each output channel (``program``); whole subjects are
then assigned (``rounding``), released by compiled SQL and checked (``release``).
``job.run_channels`` wires them together for the CLI.
"""
