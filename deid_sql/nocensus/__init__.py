"""Risk without a census (METHODS.md decision 10): population uniques estimated from the
sample's class-size histogram (``estimators``: Pitman, Zayatz, SNB, Dankar's rule), individual
risk from sampling weights (``individual``: Benedetti–Franconi; El Emam's prosecutor,
journalist and marketer), and both as record risks for the evaluators (``risk``).

The modules import scipy; import them inside functions (the CLI starts without it).
"""
