"""testbed.shuffle: keyed permutations computed in place (agents' SGD stream, metric MLPs)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from testbed.shuffle import permuted_index


@pytest.mark.parametrize("n", [1, 2, 3, 7, 100, 1001, 16000])
def test_is_a_permutation_for_any_n_static_or_traced(n):
    offsets = jnp.arange(n)
    static = np.asarray(permuted_index(jnp.uint32(12345), offsets, n))
    traced = np.asarray(jax.jit(lambda k: permuted_index(jnp.uint32(12345), offsets, k))(n))
    np.testing.assert_array_equal(np.sort(static), np.arange(n))
    np.testing.assert_array_equal(static, traced)


def test_batches_of_a_class_sorted_set_look_random():
    """Data sorted by class (as C2ST's pooled samples are): the class-1 fraction of
    consecutive batches of 200 must vary as under a uniform random permutation, std
    sqrt(p (1 - p) / 200 * (n - 200) / (n - 1)) = 0.0352 for n = 16,000, p = 1/2. Over 20
    seeds x 80 batches the standard error of the estimated std is ~2 %; 6 rounds of the
    shuffle gave 0.079 (runs of neighbours), so the bound 0.0352 * 1.1 can fail."""
    n = 16000
    expected = np.sqrt(0.25 / 200 * (n - 200) / (n - 1))
    f = jax.jit(lambda seed: permuted_index(seed, jnp.arange(n), n))
    stds, neighbours = [], []
    for s in range(20):
        p = np.asarray(f(jnp.uint32(7919 * s + 1)))
        stds.append(((p.reshape(-1, 200) >= n // 2).mean(1)).std())
        neighbours.append(np.mean(np.abs(np.diff(p)) == 1))
    assert np.mean(stds) < 1.1 * expected, np.mean(stds)
    assert np.mean(stds) > 0.9 * expected, np.mean(stds)
    # consecutive outputs are neighbours in the input with probability ~2 / n
    assert np.mean(neighbours) < 5 * 2 / n, np.mean(neighbours)


def test_seeds_give_different_permutations():
    n = 1000
    a = np.asarray(permuted_index(jnp.uint32(1), jnp.arange(n), n))
    b = np.asarray(permuted_index(jnp.uint32(2), jnp.arange(n), n))
    assert np.mean(a == b) < 0.02


@pytest.mark.parametrize("n", [1, 3, 1001])
def test_rolled_rounds_give_the_same_permutation(n):
    """`rolled=True` (a fori_loop over the rounds: a small program, fast to compile) is
    the same permutation as the unrolled rounds, for a traced n too."""
    offsets = jnp.arange(n)
    for seed in (0, 12345, 2**32 - 1):
        unrolled = np.asarray(permuted_index(jnp.uint32(seed), offsets, n))
        rolled = jax.jit(lambda s, k: permuted_index(s, offsets, k, rolled=True))
        np.testing.assert_array_equal(np.asarray(rolled(jnp.uint32(seed), n)), unrolled)
