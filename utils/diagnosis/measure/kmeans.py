"""K-means for the state-action heatmap's state clusters, in NumPy.

Written here rather than imported: SciPy's `scipy.cluster.vq` adds about 26 MiB to every
training process that runs the diagnostics (it loads `scipy.spatial` and
`scipy.linalg`), which alone put rltrain's memory above Stable-Baselines3's at the same
settings; scikit-learn costs several times more. The heatmap needs only a few thousand
low-dimensional points in about ten clusters, which the textbook method below handles.
Its one matrix product runs in torch, on the threads the run gave torch: NumPy's OpenBLAS
would take every core for a few thousand rows and keep them spinning after it.
"""

from __future__ import annotations

import numpy as np
import torch


def nearest(data: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """Each row's nearest centre (squared Euclidean distance, ties to the lower index).
    Computed as |x|^2 - 2 x.c + |c|^2, so memory grows with rows x centres, not with
    rows x centres x dimensions."""
    dtype = np.result_type(data, centers)
    cross = (torch.from_numpy(np.array(data, dtype, order="C"))
             @ torch.from_numpy(np.array(centers, dtype, order="C")).T).numpy()
    distances = (np.einsum("ij,ij->i", data, data)[:, None] - 2.0 * cross
                 + np.einsum("ij,ij->i", centers, centers)[None, :])
    return np.argmin(distances, axis=1)


def label_sums(data: np.ndarray, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """How many rows each of the k centres was given, and the sum of those rows."""
    sums = np.zeros((k, data.shape[1]))
    np.add.at(sums, labels, data)
    return np.bincount(labels, minlength=k).astype(np.float64), sums


def kmeans_pp_start(data: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ starting centres (Arthur and Vassilvitskii, 2007): each next centre is a
    row drawn with probability proportional to its squared distance from the centres
    chosen so far; uniformly where every row sits on a centre already."""
    centers = np.empty((k, data.shape[1]))
    centers[0] = data[rng.integers(len(data))]
    closest = ((data - centers[0]) ** 2).sum(axis=1)
    for i in range(1, k):
        total = closest.sum()
        probs = closest / total if total > 0 else None
        centers[i] = data[rng.choice(len(data), p=probs)]
        closest = np.minimum(closest, ((data - centers[i]) ** 2).sum(axis=1))
    return centers


def kmeans(data: np.ndarray, k: int, iterations: int, seed: int) -> np.ndarray:
    """`k` centres for the rows of `data` (float64): a k-means++ start, then up to
    `iterations` Lloyd steps (assign each row to its nearest centre, move each centre to
    the mean of its rows), stopping early once no assignment changes. A centre that is
    given no row keeps its place. The same data and seed give the same centres."""
    centers = kmeans_pp_start(data, k, np.random.default_rng(seed))
    labels = None
    for _ in range(iterations):
        new_labels = nearest(data, centers)
        if labels is not None and np.array_equal(new_labels, labels):
            break
        labels = new_labels
        counts, sums = label_sums(data, labels, k)
        given = counts > 0
        centers[given] = sums[given] / counts[given, None]
    return centers
