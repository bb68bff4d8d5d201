"""A JAX / Haiku agent of your own: MC dropout with one mask per key, as a plain function.

The agent is a function `(train_data, prior_knowledge, *, settings...) -> sampler`,
registered with `@agents.register(name, predicts=...)`: its keyword settings become its
config, so `agents.load("mc_dropout_haiku", dropout_rate=0.2)`, `testbed run --set
dropout_rate=0.2`, `--seeds 0-4` and sweeps work with no config class to write.
`predicts` says it has a classification and a regression head: `testbed.evaluate`
refuses, before training, a problem that needs something else (a posterior).

The sampler is `(x [n, d], key) -> logits [n, C]` (regression: real outputs [n, 1]). One
key must be one coherent function for every row of x: here one dropout mask for the whole
batch, not one per row (`hk.dropout` would draw one per row, which is no function at all).
It is pure JAX, so the evaluators jit it and vmap it over keys.

Run: python examples/my_haiku_agent.py
"""

from __future__ import annotations

import haiku as hk
import jax
import jax.numpy as jnp
import optax

import agents
import generative
import testbed


def masked_mlp(hidden: tuple[int, ...], num_outputs: int, rate: float):
    """An MLP whose hidden units are dropped with one mask per rng key (shared by rows)."""

    def forward(x):
        h = x
        for width in hidden:
            h = jax.nn.relu(hk.Linear(width)(h))
            keep = jax.random.bernoulli(hk.next_rng_key(), 1.0 - rate, (1, width))
            h = h * keep / (1.0 - rate)  # one mask for every row of x: one function per key
        return hk.Linear(num_outputs)(h)

    return hk.transform(forward)


@agents.register("mc_dropout_haiku", predicts=("labels", "real_values"))
def mc_dropout_haiku(
    train_data: testbed.Data,
    prior: testbed.PriorKnowledge,
    *,
    hidden: tuple[int, ...] = (50, 50),
    dropout_rate: float = 0.1,
    learning_rate: float = 1e-3,
    weight_decay: float = 1e-4,
    num_steps: int = 1000,
    batch_size: int = 100,
    seed: int = 0,
):
    """MC dropout (Haiku MLP, Adam): one dropout mask per sampled function."""
    if not 0.0 <= dropout_rate < 1.0:  # bad settings: a one-line error naming the field
        raise testbed.InputError(f"dropout_rate: got {dropout_rate!r}; allowed: [0, 1)")
    regression = prior.num_classes < 2
    net = masked_mlp(tuple(hidden), 1 if regression else prior.num_classes, dropout_rate)
    x = jnp.asarray(train_data.x, jnp.float32).reshape(len(train_data.x), -1)
    y = jnp.asarray(train_data.y).reshape(len(x))
    y = y.astype(jnp.float32) if regression else y.astype(jnp.int32)

    def loss(params, key, xb, yb):
        out = net.apply(params, key, xb)
        if regression:
            fit = jnp.mean((out[:, 0] - yb) ** 2)
        else:
            fit = optax.softmax_cross_entropy_with_integer_labels(out, yb).mean()
        l2 = sum(jnp.sum(w**2) for w in jax.tree_util.tree_leaves(params))
        return fit + weight_decay * l2 / max(len(x), 1)

    optimizer = optax.adam(learning_rate)
    init_key, train_key = jax.random.split(jax.random.PRNGKey(seed))
    params = net.init(init_key, x[:1])

    @jax.jit
    def train(params):
        def step(carry, key):
            params, state = carry
            rows_key, mask_key = jax.random.split(key)
            rows = jax.random.randint(rows_key, (batch_size,), 0, len(x))  # with replacement
            grads = jax.grad(loss)(params, mask_key, x[rows], y[rows])
            updates, state = optimizer.update(grads, state)
            return (optax.apply_updates(params, updates), state), None

        keys = jax.random.split(train_key, num_steps)
        (params, _), _ = jax.lax.scan(step, (params, optimizer.init(params)), keys)
        return params

    params = train(params) if len(x) else params

    def sampler(x, key):
        return net.apply(params, key, jnp.asarray(x, jnp.float32))

    return sampler


if __name__ == "__main__":
    problem = generative.load("classification_2d/135", num_test_seeds=200, num_enn_samples=100)
    for name in ("uniform", "mc_dropout_haiku"):
        q = testbed.evaluate(agents.load(name), problem)
        print(f"{name:16s} KL {q['kl_estimate']:.3f}  test accuracy {q['test_acc']:.2f}")
    # the settings are a config: override them by name, as --set does on the command line
    agent = agents.load("mc_dropout_haiku", dropout_rate=0.3, num_steps=300)
    print(agent.config, "key", agent.key)
    try:  # the wrong kind of problem is refused before training, naming agents that fit
        testbed.evaluate(agent, generative.load("sbi/two_moons/1000/1"))
    except testbed.InputError as e:
        print("refused:", e)
