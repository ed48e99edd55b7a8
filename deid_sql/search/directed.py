"""Directed Policy Search (seed 001 §2.4.1), the baseline BPS is compared with.

Start at a uniformly random policy.  If it meets the threshold, walk down (towards the
original data) through random children until one does not, and report its parent;
otherwise walk up through random parents until one meets it, and report that one.
"""

from __future__ import annotations

import time

import numpy as np

from ..evaluate import Evaluator
from ..lattice import Lattice
from .boundary import BoundarySearch, Progress, check_threshold


def directed_policy_search(lattice: Lattice, evaluator: Evaluator, threshold: float, iterations: int,
                           seed: int = 0, progress: Progress | None = None) -> BoundarySearch:
    """Run the directed walk ``iterations`` times; Ctrl-C returns what was found so far."""
    check_threshold(lattice, evaluator, threshold)
    evaluator = evaluator.fork()
    rng = np.random.default_rng(seed)
    result = BoundarySearch("directed", threshold, seed)
    start = time.perf_counter()
    try:
        for _ in range(iterations):
            current = lattice.policy(rng.integers(0, 2, lattice.nbits))
            if evaluator.evaluate(current).risk <= threshold:
                while True:  # down: the bottom exceeds T (checked), so this ends
                    zeros = np.flatnonzero(~current.array)
                    child = lattice.policy(_with(current.array, int(rng.choice(zeros)), 1))
                    if evaluator.evaluate(child).risk > threshold:
                        boundary, witness = current, child
                        break
                    current = child
            else:
                while True:  # up: the top meets T (checked), so this ends
                    ones = np.flatnonzero(current.array)
                    parent = lattice.policy(_with(current.array, int(rng.choice(ones)), 0))
                    if evaluator.evaluate(parent).risk <= threshold:
                        boundary, witness = parent, current
                        break
                    current = parent
            result.iterations += 1
            result.add(boundary, evaluator.evaluate(boundary), witness)
            result.evaluations = evaluator.evaluations
            if progress:
                progress(1)
    except KeyboardInterrupt:
        result.interrupted = True
    result.evaluations = evaluator.evaluations
    result.seconds = time.perf_counter() - start
    return result


def _with(bits: np.ndarray, index: int, value: int) -> np.ndarray:
    out = bits.astype(np.uint8)
    out[index] = value
    return out
