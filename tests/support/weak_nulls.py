"""Weak nulls with rare whole-group effects (docs/statistics.md#weak-null): per-group summed differences with mean
exactly 0 whose rare large part the sample may not show, drawn for many samples at once.

- **shapes**: NevIR Test's source groups (683 of two pairs, 17 of one: 4 or 2 directions), 420 groups of 1–12
  directions, and a heavy tail (500 groups, geometric sizes of mean 5 capped at 40) as a stress shape;
- **rare whole-group losses**: a group loses all its directions (−n_g) with probability p and gains one direction
  (+1) with probability p × mean size, else 0: mean 0, p set so that ``differing`` groups differ on average.
  Negated, the same law is rare whole-group gains against frequent one-direction losses, so each side of a test is
  read on one law.
"""
from __future__ import annotations

import numpy as np

SHAPES = {
    "Test": lambda rng, runs: np.tile(np.repeat([4, 2], [683, 17]), (runs, 1)),
    "1-12": lambda rng, runs: rng.integers(1, 13, (runs, 420)),
    "heavy": lambda rng, runs: np.minimum(rng.geometric(0.2, (runs, 500)), 40),
}


def rare_whole_group_losses(rng: np.random.Generator, sizes: np.ndarray, differing: float) -> np.ndarray:
    """(samples × groups) sums: a whole group lost with probability p, one direction gained with probability
    p × the sample's mean size, so that E Σ_g D_g = 0 and ``differing`` groups differ on average."""
    mean = sizes.mean(axis=1, keepdims=True)
    loss = differing / sizes.shape[1] / (1 + mean)
    r = rng.random(sizes.shape)
    return np.where(r < loss, -sizes, np.where(r < loss * (1 + mean), 1, 0)).astype(float)
