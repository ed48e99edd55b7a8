"""Random Chain Search (seed 000 §3.5.1, Algorithm 1).

Repeatedly walk a uniformly random maximal chain of the whole lattice (top to bottom, one
boundary at a time) and offer every policy on it to the frontier; each chain costs its
length L = bits + 1 from the budget.
"""

from __future__ import annotations

from .frontier_search import FrontierSearcher


class RandomChainSearch(FrontierSearcher):
    method = "rcs"

    def step(self) -> None:
        chain = self.lattice.random_chain(self.lattice.top(), self.lattice.bottom(), self.rng)
        self.search_chain(chain)
