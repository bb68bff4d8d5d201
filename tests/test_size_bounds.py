"""Estimator sizes have bounds (issue 48, reproduction 5): `--option num_test_seeds=1e9`
ended in a 69-line traceback (out of memory allocating 412 GB). A size is now bounded by
the bytes its estimator would hold at once, at most half the machine's memory
(`testbed.sizes`), and refused in one line before anything is allocated."""

from __future__ import annotations

import warnings

import pytest

from experiments.cli import main
from generative.classification import ClassificationSettings
from generative.gp_regression import RegressionSettings
from leaderboard.execution import sweeping
from testbed import sizes
from testbed.errors import InputError


def _settings(**changes) -> ClassificationSettings:
    base = {"input_dim": 2, "num_train": 10, "temperature": 0.01, "tau": 10, "seed": 0}
    return ClassificationSettings(**{**base, **changes})


def test_a_billion_test_seeds_is_one_line_with_status_2(capsys):
    argv = ["run", "--agent", "uniform", "--problem", "classification_2d/0", "--option",
            "num_test_seeds=1e9"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("testbed: error: "), err
    assert "num_test_seeds: got 1,000,000,000; allowed: at most" in err[0]
    assert "GB at once" in err[0]


def test_the_bound_is_what_fits_in_half_the_memory(monkeypatch):
    monkeypatch.setenv(sizes.MEMORY_ENV, "1")
    limit = sizes.GB // 2
    with pytest.raises(InputError, match=r"num_enn_samples: got 10,000,000; allowed: at most"):
        _settings(num_enn_samples=10**7)
    try:
        _settings(num_test_seeds=10**7)
    except InputError as e:
        most = int(str(e).split("at most ")[1].split()[0].replace(",", ""))
    else:
        raise AssertionError("10^7 test batches of tau 10 fit in 0.5 GB")
    fits = _settings(num_test_seeds=most)  # the largest value named fits, one more does not
    assert fits.estimator_bytes(most, fits.num_enn_samples) <= limit
    assert fits.estimator_bytes(most + 1, fits.num_enn_samples) > limit
    with pytest.raises(InputError):
        _settings(num_test_seeds=most + 1)
    _settings()  # the defaults fit in far less


def test_every_size_option_of_the_neural_testbed_families_is_bounded():
    with pytest.raises(InputError, match="num_enn_samples: got"):
        _settings(num_enn_samples=10**12)
    base = {"input_dim": 1, "num_train": 10, "noise_std": 0.1, "seed": 0}
    for name in ("num_test_seeds", "num_enn_samples", "num_test_cache"):
        with pytest.raises(InputError, match=f"{name}: got"):
            RegressionSettings(**base, **{name: 10**12})
    from generative.real_data.problems import RealDataSettings

    with pytest.raises(InputError, match="num_test_seeds: got"):
        RealDataSettings(dataset="iris", tau=1, seed=0, num_test_seeds=10**12)


def test_a_bad_memory_setting_is_named(monkeypatch):
    monkeypatch.setenv(sizes.MEMORY_ENV, "lots")
    with pytest.raises(InputError, match="TESTBED_MEMORY_GB: got 'lots'"):
        _settings()


def test_posterior_draws_and_null_trials_are_bounded():
    import generative

    with pytest.raises(InputError, match="num_samples: got 10,000,000,000; allowed: at most"):
        generative.load("sbi/two_moons/1000/1", num_samples=10**10)
    with pytest.raises(InputError, match="lc2st_num_null: got 1,000,000,000; allowed: at most"):
        generative.load("sbi/two_moons/1000/1", lc2st=True, lc2st_num_null=10**9)
    generative.load("sbi/two_moons/1000/1", lc2st_num_null=10**9)  # no L-C2ST: not held


def test_an_agent_too_big_for_the_memory_is_one_line_with_status_2(monkeypatch, capsys):
    """`testbed run --agent ensemble --set num_ensemble=1e12` ended in a traceback (JAX out
    of memory allocating 4,000 GB; the fault injector's malformed command lines): an
    agent's sizes have no bound of their own, so running out of memory in `run` (or JAX's
    OverflowError for a size past 32 bits, which the same line gave in another process) is
    one line naming the settings; any other error of the agent keeps its traceback."""
    import testbed

    def oom(*args, **kwargs):
        raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 4000000000000 bytes.")

    monkeypatch.setattr(testbed, "evaluate", oom)
    argv = ["run", "--agent", "beta_bernoulli", "--problem", "coin/1", "--set", "a=2"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("testbed: error: beta_bernoulli on coin/1"), err
    assert "ran out of memory with --set a=2 (RESOURCE_EXHAUSTED" in err[0]

    def overflow(*args, **kwargs):  # JAX's way to say a size does not fit in 32 bits
        warnings.warn("Explicitly requested dtype int64 ... truncated to int32", stacklevel=2)
        raise OverflowError("An overflow was encountered while parsing an argument")

    monkeypatch.setattr(testbed, "evaluate", overflow)
    with warnings.catch_warnings(record=True) as seen:  # JAX's warning before it: unsaid
        warnings.simplefilter("always")
        assert main(argv) == 2
    assert seen == []
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "met a number too large with --set a=2 (An overflow" in err[0], err

    def fine(*args, **kwargs):  # a run that warns and ends well says its warnings
        warnings.warn("a warning of the agent's", stacklevel=2)
        return {"kl": 0.0}

    monkeypatch.setattr(testbed, "evaluate", fine)
    with pytest.warns(UserWarning, match="a warning of the agent's"):
        sweeping.run_one("beta_bernoulli", "coin/1", overrides={"a": 2})

    def bug(*args, **kwargs):  # warned, then failed: its traceback and its warning
        warnings.warn("warned before the bug", stacklevel=2)
        raise RuntimeError("a bug of the agent's")

    monkeypatch.setattr(testbed, "evaluate", bug)
    with pytest.warns(UserWarning, match="warned before the bug"):
        with pytest.raises(RuntimeError, match="a bug of the agent's"):
            main(argv)

    def value_bug(*args, **kwargs):  # an error no size check knows: said with its warning
        warnings.warn("warned before the value error", stacklevel=2)
        raise ValueError("an agent's own value error")

    monkeypatch.setattr(testbed, "evaluate", value_bug)
    with pytest.warns(UserWarning, match="warned before the value error"):
        with pytest.raises(ValueError, match="own value error"):
            sweeping.run_one("beta_bernoulli", "coin/1", overrides={"a": 2})


@pytest.mark.parametrize(
    "setting, name",
    [
        ("hidden_sizes=1e9", "hidden_sizes: got 1,000,000,000"),  # hung, Ctrl-C ignored
        ("hidden_sizes=100000000,100000000", "hidden_sizes: got 100,000,000"),  # aborted
        ("num_ensemble=1e12", "num_ensemble: got 1,000,000,000,000"),
    ],
)
def test_network_sizes_are_bounded_before_anything_is_allocated(capsys, setting, name):
    """An ensemble too big for the memory is refused when its config is made, in one line
    naming the size and what fits: `hidden_sizes=1e9` hung with Ctrl-C ignored and
    `hidden_sizes=100000000,100000000` aborted the interpreter with a native stack trace."""
    argv = ["run", "--agent", "ensemble", "--problem", "coin/1", "--set", setting]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("testbed: error: agent ensemble: " + name), err
    assert "allowed:" in err[0] and "TESTBED_MEMORY_GB" in err[0]


def test_every_registered_sweep_config_fits_and_sgmcmc_is_bounded():
    import agents

    for name in ("mlp", "ensemble", "ensemble+", "dropout", "hypermodel", "bbb", "epinet",
                 "sgmcmc", "deep_kernel"):  # fmt: skip
        assert agents.sweep(name), name  # every config of every sweep is made and checked
    with pytest.raises(InputError, match="num_hidden: got 1,000,000; allowed: at most"):
        agents.load("sgmcmc", num_hidden=10**6)
