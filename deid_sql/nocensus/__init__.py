"""Risk without a census (METHODS decision 10): population-uniqueness estimators, individual risk.

Registered as risk models from ``plugin``; imports scipy, so it is loaded inside functions.

Modules:

- ``estimators.py``: population uniques from the class-size histogram: Zayatz, Pitman, SNB (Shlosser's K),
  Dankar's rule; ``EstimationError``
- ``individual.py``: Benedetti–Franconi's E[1/F | f] and El Emam's prosecutor/journalist/marketer risks
- ``plugin.py``: registers ``pitman``, ``zayatz``, ``snb``, ``dankar``, ``benedetti-franconi`` in
  ``registry.RISK_MODELS``
- ``risk.py``: the estimators as record risks (``BenedettiFranconiRisk``, dataset-level ``UniquenessRisk``);
  ``policy_figures``, every no-census figure of a policy

May import: ``errors``, ``registry``.
Imported by: ``cli``, ``report``.
"""
