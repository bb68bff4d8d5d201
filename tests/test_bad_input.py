"""Bad input gets a one-line error naming the field and what is allowed: every agent's
config values and every problem family's ids, one table each."""

import pytest

import agents
import generative
from testbed.errors import InputError

BAD_CONFIG = {  # agent: [(field, a value it refuses), ...]
    "ensemble": [("num_ensemble", 0), ("learning_rate", -1e-3)],
    "ensemble+": [
        ("num_ensemble", 0),
        ("distribution", "poisson"),
        ("temp_scale_prior", "cubic"),
        ("l2_weight_decay", -1.0),
    ],
    "mlp": [("l2_weight_decay", -0.5), ("hidden_sizes", (50, 0))],
    "logistic_regression": [("num_batches", 0)],
    "dropout": [("dropout_rate", 1.0), ("dropout_rate", -0.1)],
    "sgmcmc": [
        ("learning_rate", -1e-4),
        ("momentum_decay", 1.0),
        ("burn_in_time", 600_000),
        ("prior_variance", 0.0),
    ],
    "bbb": [("sigma_1", -1.0), ("mixture_scale", 1.5), ("kl_method", "monte_carlo")],
    "hypermodel": [("index_dim", 0), ("distribution", "uniform")],
    "epinet": [("index_dim", 0)],
    "deep_kernel": [("hidden_sizes", ())],
    "knn": [("num_neighbors", 0), ("weighting", "gaussian")],
    "random_forest": [("criterion", "mse"), ("num_trees", 0)],
    "npe": [("num_rounds", 0), ("learning_rate", -1.0), ("density_estimator", "gp")],
    "nle": [("num_chains", 0), ("init_strategy", "latest")],
    "nre": [("num_atoms", 1)],
    "rej_abc": [("num_top_samples", 1), ("kde_bandwidth", "wide")],
    "smc_abc": [("epsilon_decay", 1.5), ("kernel_variance_scale", 0.0)],
    "nre_c": [("num_classes", 0), ("gamma", 0.0)],
    "bnre": [("regularization_strength", -1.0)],
    "npse": [("sampling_steps", 1), ("sde_type", "xx")],
    "fmpe": [("vf_estimator", "unet"), ("num_layers", 0)],
}


@pytest.mark.parametrize(
    "name, field, value", [(a, f, v) for a, bad in BAD_CONFIG.items() for f, v in bad]
)
def test_bad_config_values_name_the_field(name, field, value):
    with pytest.raises(InputError, match=field) as info:
        agents.load(name, **{field: value})
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "pid, match",
    [
        ("real/imagenet/1/1", "dataset: got 'imagenet'"),
        ("real/iris/1/1/121", "num_train: got 121; allowed: an integer in 1..120"),
        ("real/iris/1/1/0", "num_train: got 0"),
        ("real/iris/1", "allowed: 'real/<dataset>/<tau>/<seed>'"),
        ("real/iris", "allowed: 'real/<dataset>/<tau>/<seed>'"),
        ("real/tfds/mnist/1/1/60001", "num_train: got 60001; allowed: an integer in 1..60000"),
        ("real/iris/one/1", "allowed: 'real/<dataset>/<tau>/<seed>'"),
        ("real/iris/0/1", "tau: got 0"),
        ("real/file:data.txt/1/1", "'real/file:<path>.npz|.csv/<tau>/<seed>"),
        ("real/file:data.npz/1", "'real/file:<path>.npz|.csv/<tau>/<seed>"),
        ("real/file:data.npz/1/x", "with integers after the path"),
        ("real/file:data.npz/1/1/2/3", "with integers after the path"),
        ("real/file:data.npz/0/1", "tau: got 0"),
        ("real/file:data.npz/1/1/0", "num_train: got 0"),
        ("real/mine.npz/1/1", "dataset: got 'mine.npz'; allowed: .*file:<path>.npz|.csv"),
        ("sbi/slcp/1000/1/iid7", r"iid set size \(iid<n>\): got '7'; allowed: one of: 1, 10, 100"),
        ("sbi/slcp/1000/1/iid", r"iid set size \(iid<n>\): got ''"),
        ("sbi/slcp/1000/1/iid010", "got '010'"),
        ("sbi/slcp/1000/1/iid10/seeded", "allowed: 'sbi/<task>/<num_simulations>/<observation>'"),
        ("sbi/slcp/1000/1/iid10/x", "'.../iid<n>' for n i.i.d. draws"),
        ("sbi/slcp/1000/1/seeded/seeded", "problem id: got"),
        ("conjugate_sbi/1000", "conjugate_sbi/<problem>/<num_simulations>"),
        ("conjugate_sbi/wyb/99/1000", "conjugate problem"),
        ("conjugate_sbi/wyb/1", "conjugate problem"),
        ("conjugate_sbi/wyb/1/500", "num_simulations"),
        ("conjugate_sbi/wyb/1/1e3", "num_simulations"),
    ],
)
def test_bad_problem_ids_say_what_is_allowed(pid, match):
    with pytest.raises(InputError, match=match) as info:
        generative.problem_settings(pid)
    assert "allowed" in str(info.value) and "\n" not in str(info.value)
