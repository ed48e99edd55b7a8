"""The baselines the benchmarks measure the product against.  They live with the tests
(``tests/baselines/``), which compare the product with them too, so that both import one copy
and none ships; this puts the repository's root on ``sys.path`` and hands them on, so a benchmark
imports them as it imports ``adult_zip``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.baselines.chain_rekey import RekeyChainEvaluator  # noqa: E402
from tests.baselines.fulldomain import exhaustive, search_without_inherited_bounds  # noqa: E402

__all__ = ["RekeyChainEvaluator", "exhaustive", "search_without_inherited_bounds"]
