"""The heatmap's k-means: finds well-separated clusters, is repeatable, and copes with
states that are all the same."""

import numpy as np

from rltrain.utils.diagnosis.measure.kmeans import kmeans, nearest


def blobs(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    means = np.array([[0.0, 0.0, 0.0], [10.0, 0.0, 0.0], [0.0, 10.0, 5.0], [-8.0, -8.0, 8.0]])
    truth = rng.integers(len(means), size=2000)
    return means[truth] + rng.normal(scale=0.5, size=(2000, 3)), truth


def test_well_separated_clusters_are_found_exactly():
    data, truth = blobs()
    labels = nearest(data, kmeans(data, 4, iterations=20, seed=3))
    # The same partition up to renaming: each found cluster holds one true cluster.
    pairs = {(int(a), int(b)) for a, b in zip(labels, truth, strict=True)}
    assert len(pairs) == 4 and len({a for a, _ in pairs}) == 4


def test_the_same_seed_gives_the_same_centres_and_another_seed_may_not():
    data, _ = blobs(1)
    first = kmeans(data, 6, iterations=20, seed=5)
    assert np.array_equal(first, kmeans(data, 6, iterations=20, seed=5))
    assert not np.array_equal(first, kmeans(data, 6, iterations=20, seed=6))


def test_identical_states_give_finite_centres_without_warnings():
    data = np.ones((50, 2))
    with np.errstate(all="raise"):
        centers = kmeans(data, 4, iterations=10, seed=0)
    assert np.all(centers == 1.0)
    assert set(nearest(data, centers)) == {0}


def test_nearest_matches_the_direct_distance():
    rng = np.random.default_rng(2)
    data, centers = rng.normal(size=(300, 5)), rng.normal(size=(7, 5))
    direct = ((data[:, None, :] - centers[None]) ** 2).sum(-1).argmin(1)
    assert np.array_equal(nearest(data, centers), direct)
