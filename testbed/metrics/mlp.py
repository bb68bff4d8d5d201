"""Binary MLP classifiers with scikit-learn's `MLPClassifier(solver="adam")` semantics, in JAX.

Many classifiers (cross-validation folds, null trials) train at once: models are packed in
chunks of a fixed size, an epoch of a chunk is one jitted `vmap` over its models (a chunk
of one is not batched) of a `scan` over minibatches. Chunks run epoch after epoch in
threads, each on whichever core is free (one CPU computation keeps about one core busy);
when a model stops, its chunk is taken apart and the models still training are packed
into new chunks (the last stragglers of a large batch into quarter-size ones), so a slow
model costs one small chunk and at most two programs are compiled. Shuffles are computed
on the device from a per-model hash (testbed.shuffle), so a model's result does not depend
on the chunking (up to float rounding). Weights are kept feature-major and the gradient is
written by hand, so every matmul reaches XLA's fast small-matrix kernels (scikit-learn's
layout is restored on the way out). The semantics follow scikit-learn: Glorot-uniform init
(bound sqrt(6 / (fan_in + fan_out)) for weights and biases), ReLU hidden layers and a
logistic output, mean log-loss plus 0.5 * alpha * sum(W^2) / batch, Adam with
scikit-learn's bias correction folded into the step size, a fresh shuffle each epoch with
the last minibatch short, and stopping after more than `n_iter_no_change` epochs without
a `tol` improvement of the training loss, or, with `early_stopping`, of the accuracy on a
stratified validation split (best weights restored). Each model stops on its own rule;
finished models are frozen while the others go on.

Shapes are padded to buckets (`bucket`: at most 12.5 % larger, eight sizes an octave): the
rows of the data, each model's rows in whole minibatches and its validation rows, so
nearby sample sizes share one compiled program. The padding is inert: padded rows are never
indexed (the data is z-scored on the host before; the shuffle permutes a model's own rows),
padded minibatches have weight 0 and update nothing (they still cost their compute), and the
epoch's loss is summed step by step, so a model's numbers do not depend on the padding
(tested; bit for bit on our CPU). The compiled programs are kept in testbed's cache folder
(`StoredPrograms`), so a fresh process neither compiles nor traces them again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from testbed import shuffle
from testbed.compilation_cache import StoredPrograms, with_library_cache
from testbed.config import check_at_least, check_in_range, check_nonnegative, check_positive
from testbed.cores import thread_budget
from testbed.errors import InputError
from testbed.metrics import mlp_checkpoint, mlp_chunks
from testbed.metrics.mlp_chunks import ChunkScheduler, ModelData, TrainState
from testbed.progress import activity
from testbed.shuffle import mix32, permuted_index

Params = tuple[tuple[jax.Array, jax.Array], ...]
BUCKET_BITS = 3  # shape buckets: 2^3 = 8 sizes an octave (see `bucket`)


@dataclasses.dataclass(frozen=True)
class MLPConfig:
    """scikit-learn MLPClassifier settings (defaults are scikit-learn's, hidden excepted)."""

    hidden_layers: tuple[int, ...] = (20, 20)
    alpha: float = 1e-4
    learning_rate: float = 1e-3
    batch_size: int = 200
    max_iter: int = 10_000
    tol: float = 1e-4
    n_iter_no_change: int = 10
    early_stopping: bool = False
    validation_fraction: float = 0.1
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-8

    def __post_init__(self):
        if not self.hidden_layers:
            raise InputError("hidden_layers: got (); allowed: a tuple of integers >= 1")
        for h in self.hidden_layers:
            check_at_least("hidden_layers", h, 1)
        check_nonnegative("alpha", self.alpha)
        check_positive("learning_rate", self.learning_rate)
        check_at_least("batch_size", self.batch_size, 1)
        check_at_least("max_iter", self.max_iter, 1)
        check_nonnegative("tol", self.tol)
        check_at_least("n_iter_no_change", self.n_iter_no_change, 1)
        check_in_range("validation_fraction", self.validation_fraction, 1e-6, 0.5)
        check_in_range("beta_1", self.beta_1, 0.0, 0.999999)
        check_in_range("beta_2", self.beta_2, 0.0, 0.999999)
        check_positive("epsilon", self.epsilon)

    @classmethod
    def sbibm(cls, dim: int) -> MLPConfig:
        """sbibm's C2ST classifier: hidden (10 dim, 10 dim), max_iter 10000, no early stopping."""
        return cls(hidden_layers=(10 * dim, 10 * dim))

    @classmethod
    def sbi(cls, dim: int) -> MLPConfig:
        """sbi's (and the L-C2ST paper's) classifier: max_iter 1000, early stopping, patience 50."""
        return cls(
            hidden_layers=(10 * dim, 10 * dim),
            max_iter=1000,
            early_stopping=True,
            n_iter_no_change=50,
        )


def glorot_init(in_dim: int, hidden: tuple[int, ...], seed: int) -> list[np.ndarray]:
    """scikit-learn's initial weights for `random_state=seed`: [W1, b1, W2, b2, ...] float32.

    Same draws in the same order as `MLPClassifier._init_coef` (ReLU factor 6), so a model
    starts exactly where scikit-learn's does.
    """
    rng = np.random.RandomState(seed)
    sizes = (in_dim, *hidden, 1)
    out = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = np.sqrt(6.0 / (fan_in + fan_out))
        out.append(rng.uniform(-bound, bound, (fan_in, fan_out)).astype(np.float32))
        out.append(rng.uniform(-bound, bound, fan_out).astype(np.float32))
    return out


def stack_init(in_dim: int, hidden: tuple[int, ...], seeds) -> tuple[np.ndarray, ...]:
    """Initial [W1, b1, W2, ...] of len(seeds) models, stacked on a leading model axis (host)."""
    per_model = [glorot_init(in_dim, hidden, int(s)) for s in seeds]
    return tuple(np.stack(arrays) for arrays in zip(*per_model))


def _forward_t(params: Params, x_t: jax.Array) -> tuple[jax.Array, list[jax.Array]]:
    """Feature-major forward pass of one model in the trainer's layout (W [out, in], b [out]).

    x_t [d, n] -> (logits [n], activations [in, n] feeding each layer). With the batch on
    the last axis every matmul of the pass and of its gradient is a plain or right-transposed
    product, which XLA's CPU backend sends to its fast small-matrix kernels.
    """
    acts = [x_t]
    for w, b in params[:-1]:
        acts.append(jax.nn.relu(w @ acts[-1] + b[:, None]))
    w, b = params[-1]
    return (w @ acts[-1] + b[:, None])[0], acts


def _loss_and_grad(params: Params, x_t, yb, wb, alpha):
    """Mean log-loss + 0.5 alpha sum(W^2) over the weighted rows, and its gradient by hand.

    Same values as autodiff of scikit-learn's loss (tested); written out because the
    hand-placed transposes make the small matmuls 1.3x-2.5x faster on CPU than autodiff's.
    x_t [d, n] feature-major, yb and wb [n]; params in the trainer's layout.
    """
    count = jnp.maximum(jnp.sum(wb), 1.0)
    z, acts = _forward_t(params, x_t)
    nll = jax.nn.softplus(z) - yb * z  # -(y log s(z) + (1 - y) log s(-z)) for y in {0, 1}
    l2 = sum(jnp.sum(w**2) for w, _ in params)
    loss = jnp.sum(nll * wb) / count + 0.5 * alpha * l2 / count
    delta = (wb * (jax.nn.sigmoid(z) - yb) / count)[None]  # d loss / d logits, [1, n]
    grads = []
    for layer in reversed(range(len(params))):
        w, _ = params[layer]
        grads.append((delta @ acts[layer].T + alpha * w / count, jnp.sum(delta, axis=1)))
        if layer == 0:
            break
        if w.shape[0] == 1:  # the output unit: its back-projection is an outer product
            back = w[0][:, None] * delta
        else:  # W^T materialised, so the product is a plain one (not left-transposed)
            back = jax.lax.optimization_barrier(w.T) @ delta
        delta = back * (acts[layer] > 0)
    return loss, tuple(reversed(grads))


def logits(params: Params, x: jax.Array) -> jax.Array:
    """Logit of class 1 for each row of x [..., d] (one model, scikit-learn's layout)."""
    h = x
    for w, b in params[:-1]:
        h = jax.nn.relu(h @ w + b)
    w, b = params[-1]
    return (h @ w + b)[..., 0]


def _to_trainer_layout(arrays) -> tuple:
    """[W1, b1, W2, ...] with W [..., in, out] -> with W [..., out, in] (and back: its own
    inverse), on the host: the trainer keeps weights feature-major (see _forward_t)."""
    return tuple(np.swapaxes(a, -1, -2) if i % 2 == 0 else a for i, a in enumerate(arrays))


def _flatten(arrays: tuple[np.ndarray, ...]) -> np.ndarray:
    """[M, P]: each model's weights and biases in one vector (one fused Adam update)."""
    m = arrays[0].shape[0]
    return np.concatenate([a.reshape(m, -1) for a in arrays], axis=1)


def _unflatten(flat, shapes) -> Params:
    """Flat vectors [..., P] back to ((W1, b1), ...) with leading axes kept; `shapes`
    without them. Works on one model's traced vector and on the host's [M, P] alike."""
    out, start = [], 0
    for shape in shapes:
        size = int(np.prod(shape))
        out.append(flat[..., start : start + size].reshape(*flat.shape[:-1], *shape))
        start += size
    return tuple((out[i], out[i + 1]) for i in range(0, len(out), 2))


class Hyper(NamedTuple):
    """The numeric settings of MLPConfig the compiled epoch reads (traced, not static)."""

    alpha: np.float32
    learning_rate: np.float32
    tol: np.float32
    beta_1: np.float32
    beta_2: np.float32
    epsilon: np.float32
    n_iter_no_change: np.int32
    max_iter: np.int32

    @classmethod
    def of(cls, cfg: MLPConfig) -> Hyper:
        floats = [np.float32(getattr(cfg, f)) for f in cls._fields[:6]]
        return cls(*floats, np.int32(cfg.n_iter_no_change), np.int32(cfg.max_iter))


def _epoch(bsz: int, shapes, hp: Hyper, x, y, rows, n_train, word, epoch, params, m, v, t, active):
    """One epoch of one model over its rows `rows[:n_train]`, freshly shuffled.

    Epoch e's order is the keyed permutation seeded by hash(word, e), computed on the
    device (a few integer operations a row, nothing from the host), so a model's training
    depends only on its own word, whichever models train beside it. Minibatches past the
    model's rows (a shorter model in a chunk, or `rows` padded to a bucket size) are inert:
    no update, loss weight 0; the epoch's loss is summed step by step, so adding them
    changes no bit of it.
    """
    seed = mix32(word ^ mix32(epoch.astype(jnp.uint32) + jnp.uint32(0x2545F491)))
    position = jnp.arange(rows.shape[0])
    order = rows[permuted_index(seed, jnp.minimum(position, n_train - 1), n_train, rolled=True)]
    order = order.reshape(-1, bsz)
    counts = jnp.clip(n_train - jnp.arange(order.shape[0]) * bsz, 0, bsz)
    b1, b2 = hp.beta_1, hp.beta_2

    def step(carry, inp):
        params, m, v, t, total = carry
        xb_t, yb, count = inp
        wb = (jnp.arange(bsz) < count).astype(jnp.float32)
        loss, g = _loss_and_grad(params, xb_t, yb, wb, hp.alpha)
        go = active & (count > 0)
        t1 = t + go.astype(jnp.float32)
        lr = hp.learning_rate * jnp.sqrt(1 - b2**t1) / (1 - b1**t1)

        def adam(p, m, v, g):
            m1 = jnp.where(go, b1 * m + (1 - b1) * g, m)
            v1 = jnp.where(go, b2 * v + (1 - b2) * g * g, v)
            return jnp.where(go, p - lr * m1 / (jnp.sqrt(v1) + hp.epsilon), p), m1, v1

        new = [adam(*leaves) for leaves in zip(*map(jax.tree_util.tree_leaves, (params, m, v, g)))]
        params, m, v = (jax.tree_util.tree_unflatten(tree, list(a)) for a in zip(*new))
        return (params, m, v, t1, total + loss * count), None

    # per epoch (not per step): flat state <-> layers, rows gathered feature-major [S, d, bsz]
    trees = tuple(_unflatten(a, shapes) for a in (params, m, v))
    tree = jax.tree_util.tree_structure(trees[0])
    xs = jnp.swapaxes(x[order], 1, 2)
    start = (*trees, t, jnp.zeros((), jnp.float32))
    (params, m, v, t, total), _ = jax.lax.scan(step, start, (xs, y[order], counts))
    params, m, v = (_flatten_traced(a) for a in (params, m, v))
    return params, m, v, t, total / jnp.maximum(n_train, 1)


def _flatten_traced(layers: Params) -> jax.Array:
    """((W1, b1), ...) of one model -> its flat vector [P] (inverse of _unflatten)."""
    return jnp.concatenate([a.ravel() for a in jax.tree_util.tree_leaves(layers)])


def _accuracy(params: Params, x, y, idx, n_valid):
    mask = jnp.arange(idx.shape[0]) < n_valid
    pred = (_forward_t(params, x[idx].T)[0] > 0).astype(jnp.float32)
    return jnp.sum((pred == y[idx]) * mask) / jnp.maximum(n_valid, 1)


@partial(jax.jit, static_argnames=("batch_size", "early_stopping", "shared_x", "shapes"))
def _train_epoch(
    hp: Hyper,
    x,
    data: ModelData,
    s: TrainState,
    *,
    batch_size: int,
    early_stopping: bool,
    shared_x: bool,
    shapes,
) -> TrainState:
    """One epoch of all models plus scikit-learn's stopping rule (numeric settings traced)."""
    x_axis = None if shared_x else 0
    epoch = partial(_epoch, batch_size, shapes, hp)
    per_model = (data.y, data.rows, data.n_train, data.words, s.n_iter, s.params, s.m, s.v, s.t)
    per_model += (s.active,)
    if data.y.shape[0] == 1:  # one model: unbatched matmuls, faster than a batch of one on CPU
        one = epoch(x if shared_x else x[0], *(a[0] for a in per_model))
        params, m, v, t, loss = (a[None] for a in one)
    else:
        params, m, v, t, loss = jax.vmap(epoch, in_axes=(x_axis,) + (0,) * 10)(x, *per_model)
    if early_stopping:
        unflatten = jax.vmap(partial(_unflatten, shapes=shapes))
        accuracy = jax.vmap(_accuracy, in_axes=(0, x_axis, 0, 0, 0))
        score = accuracy(unflatten(params), x, data.y, data.val_rows, data.n_val)
        worse = score < s.best + hp.tol
        better = score > s.best
        best_params = jnp.where((s.active & better)[:, None], params, s.best_params)
    else:
        score = loss
        worse = score > s.best - hp.tol
        better = score < s.best
        best_params = s.best_params
    a = s.active
    no_improve = jnp.where(worse, s.no_improve + 1, 0)
    n_iter = s.n_iter + 1
    still = (no_improve <= hp.n_iter_no_change) & (n_iter < hp.max_iter)
    return TrainState(
        params=params,
        m=m,
        v=v,
        t=t,
        best=jnp.where(a & better, score, s.best),
        best_params=best_params,
        no_improve=jnp.where(a, no_improve, s.no_improve),
        active=a & still,
        n_iter=jnp.where(a, n_iter, s.n_iter),
        loss=jnp.where(a, loss, s.loss),
    )


@dataclasses.dataclass(frozen=True)
class TrainedMLPs:
    """Parameters of M trained classifiers (leading model axis) and their epoch counts."""

    params: Params
    n_iter: np.ndarray
    loss: np.ndarray

    def prob_class1_host(self, model: int, x: np.ndarray) -> np.ndarray:
        """[n] probability of class 1 under one model, computed on the host (NumPy,
        float32): nothing to compile, for a few thousand rows (C2ST's held-out fold)."""
        h = np.asarray(x, np.float32)
        layers = [(np.asarray(w)[model], np.asarray(b)[model]) for w, b in self.params]
        with _one_blas_thread():
            for w, b in layers[:-1]:
                h = np.maximum(h @ w + b, 0.0)
            w, b = layers[-1]
            z = (h @ w + b)[:, 0]
        with np.errstate(over="ignore"):  # exp(-z) = inf for very negative z: p = 0
            return (1.0 / (1.0 + np.exp(-z))).astype(np.float32)

    def take(self, start: int, stop: int | None) -> TrainedMLPs:
        """The models start:stop (a slice of the model axis)."""
        cut = slice(start, stop)
        params = jax.tree_util.tree_map(lambda a: a[cut], self.params)
        return TrainedMLPs(params, self.n_iter[cut], self.loss[cut])

    @with_library_cache
    def prob_class1(self, x) -> np.ndarray:
        """[M, n] probability of class 1 under each model (x [n, d] shared or [M, n, d]).

        The rows are padded to `bucket(n)` (one compiled program for nearby n) and the
        padding cut off again; each row's probability is computed on its own.
        """
        x = np.asarray(x, np.float32)
        n = x.shape[-2]
        args = (self.params, pad_rows(x, bucket(n)))
        prob = PROBS.program(args, dict(axis=None if x.ndim == 2 else 0))(*args)
        return np.asarray(prob)[:, :n]


@functools.cache
def _blas_controller():
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # scikit-learn's dependency; without it, BLAS keeps its threads
        return None
    return ThreadpoolController()


def _one_blas_thread():
    """BLAS on one thread for these small products: OpenBLAS's threads spin-wait for
    cores, and on two busy cores they slowed a held-out fold's 1 ms of products to 8 ms,
    and the next epochs too (C2ST d = 2: 0.19 s -> 0.12 s a call)."""
    controller = _blas_controller()
    if controller is None:
        return contextlib.nullcontext()
    return controller.limit(limits=1, user_api="blas")


@partial(jax.jit, static_argnames=("axis",))
def _prob_many(params: Params, x, axis):
    return jax.nn.sigmoid(jax.vmap(logits, in_axes=(0, axis))(params, x))


# compiled programs kept across processes in testbed's cache folder (no tracing either)
_SOURCES = (__file__, shuffle.__file__, mlp_chunks.__file__)
EPOCHS = StoredPrograms(_train_epoch, "mlp_epoch", _SOURCES)
PROBS = StoredPrograms(_prob_many, "mlp_prob", _SOURCES)


def stratified_validation(y: np.ndarray, fraction: float, rng: np.random.Generator):
    """(train, validation) row indices: a stratified random split of about `fraction`.

    Sizes as scikit-learn's train_test_split(stratify=y): ceil(fraction * n) validation
    rows, shared between the classes in proportion to their counts.
    """
    n = y.shape[0]
    n_val = int(np.ceil(fraction * n))
    val = []
    classes = [np.flatnonzero(y == c) for c in (0, 1)]
    sizes = [int(np.floor(n_val * len(c) / n)) for c in classes]
    for i in np.argsort([-len(c) for c in classes])[: n_val - sum(sizes)]:
        sizes[i] += 1
    for rows, k in zip(classes, sizes):
        val.append(rng.choice(rows, size=k, replace=False))
    val = np.sort(np.concatenate(val))
    train = np.setdiff1d(np.arange(n), val)
    return train, val


def bucket(n: int) -> int:
    """The size an axis of n entries is padded to: the smallest m * 2^k >= n with m < 16
    (n itself up to 16; then 16, 18, 20, ..., 30, 32, 36, ...): at most 12.5 % padding,
    and one compiled program for all n between two neighbouring sizes."""
    shift = max(0, int(n).bit_length() - (BUCKET_BITS + 1))
    return -(-int(n) >> shift) << shift


def pad_rows(x: np.ndarray, n: int, axis: int = -2) -> np.ndarray:
    """x with its row axis (default: the second to last) padded with zeros to n rows."""
    if x.shape[axis] == n:
        return x
    shape = list(x.shape)
    shape[axis] = n
    out = np.zeros(shape, x.dtype)
    index = [slice(None)] * x.ndim
    index[axis] = slice(0, x.shape[axis])
    out[tuple(index)] = x
    return out


def _pad(rows: list[np.ndarray], multiple: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices [M, R] (zeros past each model's own) and the counts [M]: R a multiple
    of `multiple`, `bucket`ed in units of it (an epoch's minibatches)."""
    n_max = max(len(r) for r in rows)
    n_pad = multiple * bucket(max(1, -(-n_max // multiple)))
    out = np.zeros((len(rows), n_pad), np.int32)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out, np.array([len(r) for r in rows], np.int32)


def _key_words(key) -> tuple[np.uint32, np.uint32]:
    """Two uint32 words of a JAX key (raw uint32 data or a typed key), read on the host.

    An integer stands for `jax.random.PRNGKey(key)`: under JAX's default threefry keys and
    a 32-bit seed its words are (0, key mod 2^32), computed here without the two small
    programs JAX would compile for them; otherwise JAX makes the key.
    """
    if isinstance(key, int | np.integer):
        seed = int(key)
        if jax.config.jax_default_prng_impl == "threefry2x32" and -(2**31) <= seed < 2**31:
            return np.uint32(0), np.uint32(seed % 2**32)
        key = jax.random.PRNGKey(seed)
    typed = jnp.issubdtype(getattr(key, "dtype", np.uint32), jax.dtypes.prng_key)
    data = jax.random.key_data(key) if typed else key
    words = np.asarray(data, np.uint32).ravel()
    return words[0], words[-1]


def default_chunk_size(n_models: int) -> int:
    """Models per compiled epoch. CPU: at most 8 (the cost per model is flat from there on,
    and finished models free their chunk), fewer so that every core has at least two
    chunks to balance. Accelerators: all models up to 128 in one chunk (a wide batch is
    nearly free there, and one device gains nothing from chunks in threads)."""
    if jax.default_backend() != "cpu":
        return min(128, n_models)
    return min(8, max(1, n_models // (2 * thread_budget())))


@with_library_cache
def _check_training_set(x_host: np.ndarray, y_np: np.ndarray, train_rows: list) -> None:
    """`train_many`'s input rules: one label row and >= 2 training rows a model, x shared
    [N, d] or one [N, d] a model, N the rows of y."""
    n_models = len(train_rows)
    if n_models == 0 or min(len(r) for r in train_rows) < 2:
        raise InputError(
            "train_rows: got no models or a model with fewer than 2 rows; allowed: one array "
            "of at least 2 row indices per model"
        )
    if y_np.ndim != 2 or y_np.shape[0] != n_models:
        raise InputError(
            f"y: got shape {y_np.shape}; allowed: [{n_models}, N] (one label row a model)"
        )
    if x_host.ndim == 3 and x_host.shape[0] != n_models:
        raise InputError(
            f"x: got {x_host.shape[0]} per-model inputs; allowed: [N, d] shared or "
            f"[{n_models}, N, d] (one a model)"
        )
    if x_host.ndim not in (2, 3) or x_host.shape[-2] != y_np.shape[1]:
        raise InputError(
            f"x: got shape {x_host.shape} for y of shape {y_np.shape}; allowed: "
            f"[{y_np.shape[1]}, d] or [{n_models}, {y_np.shape[1]}, d] (the rows of y)"
        )


def _fit_and_validation_rows(
    cfg: MLPConfig, y_np: np.ndarray, train_rows: list, val_seed: int
) -> tuple[list, list]:
    """Each model's fitting and validation rows: a stratified split with early stopping
    (scikit-learn's), else all rows fit (and one stands in as an unused validation row)."""
    if not cfg.early_stopping:
        return train_rows, [r[:1] for r in train_rows]
    rng = np.random.default_rng(val_seed)
    splits = [
        stratified_validation(y_np[i, r].astype(int), cfg.validation_fraction, rng)
        for i, r in enumerate(train_rows)
    ]
    return [r[s[0]] for r, s in zip(train_rows, splits)], [
        r[s[1]] for r, s in zip(train_rows, splits)
    ]


def train_many(
    cfg: MLPConfig,
    x,
    y,
    train_rows: list[np.ndarray],
    *,
    init_seeds,
    key: jax.Array | int,
    val_seed: int = 0,
    chunk_size: int | None = None,
) -> TrainedMLPs:
    """Trains len(train_rows) classifiers at once; model i fits rows train_rows[i] of (x, y[i]).

    x: [N, d] shared by all models or [M, N, d]; y: [M, N] labels in {0, 1}. With early
    stopping each model's rows are split into training and validation parts (stratified).
    init_seeds: one scikit-learn `random_state` per model for the initial weights.
    Models train in chunks of `chunk_size` (one compiled epoch for every chunk), run by a
    thread per core without a barrier between epochs; a chunk in which a model stopped is
    repacked with other chunks' survivors, so a long-running straggler costs one chunk, not
    the whole batch. Results do not depend on the chunking beyond float rounding: each
    model's shuffles come from its own hash of (key, model index); `key` is a JAX key or
    an integer seed (= `jax.random.PRNGKey(seed)`). chunk_size None:
    `default_chunk_size(M)`. With a checkpoint directory set, a training that runs for
    minutes is checkpointed and a later call on the same inputs resumes it
    (`testbed.metrics.mlp_checkpoint`). Shapes are padded to buckets (`bucket`: the N rows
    of x and y, each model's rows in minibatches, its validation rows), so one compiled
    program serves nearby sizes; the padding is inert (rows never indexed, minibatches of
    weight 0).
    """
    x_host = np.asarray(x, np.float32)
    y_np = np.asarray(y, np.float32)
    n_models = len(train_rows)
    _check_training_set(x_host, y_np, train_rows)
    k0, k1 = _key_words(key)
    decides = (repr(cfg), x_host, y_np, list(train_rows), np.asarray(init_seeds), k0, k1, val_seed)
    keep = mlp_checkpoint.for_training(decides)  # None without a checkpoint folder
    if chunk_size is None:
        chunk = default_chunk_size(n_models)
    else:
        check_at_least("chunk_size", chunk_size, 1)
        chunk = min(chunk_size, n_models)
    fit_rows, val_rows = _fit_and_validation_rows(cfg, y_np, train_rows, val_seed)
    batch = min(cfg.batch_size, min(len(r) for r in fit_rows))  # as scikit-learn's
    train_idx, n_train = _pad(fit_rows, batch)
    val_idx, n_val = _pad(val_rows, 1)
    init = _to_trainer_layout(stack_init(x_host.shape[-1], cfg.hidden_layers, init_seeds))
    shapes = tuple(a.shape[1:] for a in init)
    # each model's shuffle word: a hash of (key, model index), on the host
    words = mix32(k0 ^ mix32(np.arange(n_models, dtype=np.uint32) + k1))
    n_rows = bucket(y_np.shape[1])  # the padding rows are never indexed
    x_host = pad_rows(x_host, n_rows)
    x = jax.device_put(x_host)
    data = ModelData(pad_rows(y_np, n_rows, -1), train_idx, n_train, words, val_idx, n_val)

    hp = Hyper.of(cfg)
    programs: dict[tuple[int, bool], Any] = {}  # by chunk size and shared x

    def epoch(state: TrainState, chunk_data: ModelData, x_chunk) -> TrainState:
        shared = x_chunk.ndim == 2
        size = (chunk_data.y.shape[0], shared)
        if size not in programs:
            static = dict(
                batch_size=batch, early_stopping=cfg.early_stopping, shared_x=shared, shapes=shapes
            )
            programs[size] = EPOCHS.program((hp, x_chunk, chunk_data, state), static)
        return programs[size](hp, x_chunk, chunk_data, state)

    out = TrainState.start(_flatten(init), cfg.early_stopping)  # on the host; chunks: copies
    if keep is not None:
        out = keep.load(out)
    with activity(f"training {n_models:,} classifiers on {y_np.shape[1]:,} rows"):
        ChunkScheduler(epoch, out, data, x, x_host, chunk, keep).run()
    if keep is not None:
        keep.remove()
    final = out.best_params if cfg.early_stopping else out.params
    arrays = _to_trainer_layout([a for layer in _unflatten(final, shapes) for a in layer])
    params = jax.device_put(tuple(zip(arrays[::2], arrays[1::2])))  # W [M, in, out] again
    return TrainedMLPs(params, out.n_iter.copy(), out.loss.copy())
