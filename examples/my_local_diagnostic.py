"""A local diagnostic of your own, compared with the L-C2ST paper's four on its experiments.

Nearest-neighbour sign test: at x_o, take the K calibration pairs whose x are nearest to
x_o; when q = p, the draw of q at x_i falls below the true theta_i (first coordinate) with
probability 1/2, so the share s of such pairs has mean 1/2. Statistic (s - 1/2)^2; its
null: the same statistic on H draws of K fair coins. One function, one registry line:

    python -m experiments.reproduce_lc2st --import examples/my_local_diagnostic.py \
        --diagnostics nn_sign,lc2st --parts level --tasks gaussian_linear --runs 1
"""

import numpy as np

from testbed.metrics import LocalData, register_local
from testbed.metrics.local import result

NEIGHBOURS = 200


@register_local("nn_sign", "nearest-neighbour sign test")
def nn_sign(data: LocalData):
    k = min(NEIGHBOURS, len(data.x))
    scale = data.x.std(0) + 1e-12
    rng = np.random.default_rng(data.seed)
    below = (data.q_theta[:, 0] < data.theta[:, 0]).astype(float)
    if data.under_null:  # the paper's false-positive run: the signs of a null draw
        below = rng.integers(0, 2, len(below)).astype(float)
    coins = rng.integers(0, 2, (data.num_trials_null, k))  # the same null at every x_o
    stats, nulls = [], []
    for x_o in data.observations:
        near = np.argsort(np.sum(((data.x - x_o) / scale) ** 2, axis=1))[:k]
        stats.append((below[near].mean() - 0.5) ** 2)
        nulls.append((coins.mean(1) - 0.5) ** 2)
    return {"mse": result(stats, np.stack(nulls))}
