"""ff.initializers: Keras's distributions and fan rules, checked by their statistics, and
seeding (same seed, same values; set_seed for unseeded initializers)."""
import numpy as np
import pytest

import fragflow as ff

init = ff.initializers


def test_fans_follow_keras_rules():
    assert init.compute_fans(()) == (1, 1)
    assert init.compute_fans((7,)) == (7, 7)
    assert init.compute_fans((20, 30)) == (20, 30)
    assert init.compute_fans((3, 5, 8, 16)) == (3 * 5 * 8, 3 * 5 * 16)     # HWIO


def test_constants():
    assert (init.zeros()((2, 3)) == 0).all() and init.zeros()((2, 3)).dtype == np.float32
    assert (init.ones()(4) == 1).all()
    assert (init.constant(2.5)((3,)) == 2.5).all()
    np.testing.assert_array_equal(init.constant([1, 2])((2,)), [1.0, 2.0])
    with pytest.raises(ff.AttrError, match="holds shape"):
        init.constant([1, 2])((3,))


@pytest.mark.parametrize("name, shape, mean, std, bound", [
    ("random_normal", (200, 300), 0.0, 0.05, None),
    ("random_uniform", (200, 300), 0.0, 0.1 / np.sqrt(12), 0.05),
    ("truncated_normal", (200, 300), 0.0, 0.05 * 0.8796, 0.1),
    ("glorot_uniform", (200, 300), 0.0, np.sqrt(2 / 500), np.sqrt(6 / 500)),
    ("glorot_normal", (3, 3, 40, 60), 0.0, np.sqrt(2 / (9 * 100)),
     2 * np.sqrt(2 / (9 * 100)) / 0.8796),
    ("he_normal", (3, 3, 40, 60), 0.0, np.sqrt(2 / (9 * 40)),
     2 * np.sqrt(2 / (9 * 40)) / 0.8796),
    ("he_uniform", (200, 300), 0.0, np.sqrt(2 / 200), np.sqrt(6 / 200)),
])
def test_distribution_statistics(name, shape, mean, std, bound):
    values = init.get(name)(shape) if name not in ("random_normal", "random_uniform",
                                                    "truncated_normal") else \
        getattr(init, name)(seed=3)(shape)
    n = values.size
    assert values.shape == shape and values.dtype == np.float32
    assert abs(values.mean() - mean) < 5 * std / np.sqrt(n)
    assert abs(values.std() / std - 1) < 0.02, (values.std(), std)
    if bound is not None:
        assert np.abs(values).max() <= bound * (1 + 1e-6)


def test_truncated_draws_stay_within_two_standard_deviations():
    values = init.truncated_normal(mean=1.0, stddev=0.5, seed=0)((10000,))
    assert values.min() >= 0.0 and values.max() <= 2.0
    assert abs(values.mean() - 1.0) < 0.02


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (2, 3, 5)])
def test_orthogonal(shape):
    q = init.orthogonal(gain=2.0, seed=1)(shape).reshape(-1, shape[-1]).astype(np.float64)
    rows, cols = q.shape
    gram = q.T @ q if rows >= cols else q @ q.T
    np.testing.assert_allclose(gram, 4.0 * np.eye(min(rows, cols)), atol=1e-5)


def test_a_seed_fixes_the_values_and_different_seeds_differ():
    a = init.glorot_uniform(seed=7)((5, 5))
    np.testing.assert_array_equal(a, init.GlorotUniform(seed=7)((5, 5)))
    np.testing.assert_array_equal(a, init.glorot_uniform(seed=7)((5, 5)))
    assert not np.array_equal(a, init.glorot_uniform(seed=8)((5, 5)))


def test_set_seed_makes_unseeded_initializers_reproducible():
    init.set_seed(11)
    first = [init.he_normal()((4, 4)), init.random_uniform()((3,))]
    init.set_seed(11)
    second = [init.he_normal()((4, 4)), init.random_uniform()((3,))]
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], init.he_normal()((4, 4)))


def test_get_accepts_names_classes_and_instances():
    assert isinstance(init.get("glorot_uniform"), init.GlorotUniform)
    assert isinstance(init.get("HeNormal"), init.HeNormal)
    assert isinstance(init.get(init.Zeros), init.Zeros)
    instance = init.orthogonal(seed=1)
    assert init.get(instance) is instance
    with pytest.raises(ff.AttrError, match="unknown initializer"):
        init.get("glorot")
