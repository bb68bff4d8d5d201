"""The batched RK5(4) solver against scipy's solve_ivp, failure handling, ODE-task likelihoods."""

import numpy as np
import pytest
from scipy import stats
from scipy.integrate import solve_ivp

from generative import sbi
from generative.sbi import ode
from generative.sbi.ode_tasks import LV_TIMES, SIR_TIMES, lotka_volterra_rhs, sir_rhs


def _scipy_solution(rhs, y0, params, times, method="DOP853", tol=1e-12):
    sol = solve_ivp(
        lambda t, y: rhs(y[None], params[None])[0],
        (times[0], times[-1]),
        y0,
        method=method,
        rtol=tol,
        atol=tol,
        t_eval=times,
    )
    return sol.y.T


CASES = {
    "sir": (sir_rhs, [1e6 - 1.0, 1.0, 0.0], SIR_TIMES),
    "lotka_volterra": (lotka_volterra_rhs, [30.0, 1.0], LV_TIMES),
}


@pytest.mark.parametrize("name", list(CASES))
def test_batched_solver_matches_solve_ivp(name):
    rhs, y0, times = CASES[name]
    theta = sbi.get_task(name).sample_prior(6, seed=4)
    ours = ode.solve(rhs, np.tile(y0, (6, 1)), theta, times)
    for i in range(6):
        exact = _scipy_solution(rhs, y0, theta[i], times)  # DOP853 at 1e-12: the "truth"
        same_tol = _scipy_solution(rhs, y0, theta[i], times, method="RK45", tol=1e-8)
        err = np.abs(ours[i] - exact) / (1 + np.abs(exact))
        ref_err = np.abs(same_tol - exact) / (1 + np.abs(exact))
        # Global error at tolerance 1e-8 is a small multiple of it for these smooth problems;
        # scipy's own RK45 at the same tolerance reaches ~4e-6 on Lotka-Volterra cycles.
        assert err.max() < 2e-5
        assert err.max() < 10 * ref_err.max() + 1e-9


def test_solver_rows_are_independent_of_the_batch():
    rhs, y0, times = CASES["lotka_volterra"]
    theta = sbi.get_task("lotka_volterra").sample_prior(5, seed=1)
    batch = ode.solve(rhs, np.tile(y0, (5, 1)), theta, times)
    alone = ode.solve(rhs, np.array([y0]), theta[2:3], times)
    np.testing.assert_array_equal(batch[2], alone[0])


def test_failed_solves_are_nan_rows():
    """y' = c y^2 from y = 1 blows up at t = 1 / c: rows with c > 1 / 2 fail before t = 2."""
    rhs = lambda y, p: p * y**2  # noqa: E731
    c = np.array([[0.1], [2.0], [0.3], [1.0]])
    out = ode.solve(rhs, np.ones((4, 1)), c, np.array([0.0, 1.0, 2.0]))
    assert np.isnan(out[1]).all() and np.isnan(out[3]).all()
    exact = 1 / (1 - c[[0, 2], 0][:, None] * np.array([0.0, 1.0, 2.0]))
    np.testing.assert_allclose(out[[0, 2], :, 0], exact, rtol=1e-7)
    # A step budget that is too small fails the row too (DifferentialEquations' maxiters).
    few = ode.solve(rhs, np.ones((1, 1)), c[:1], np.array([0.0, 2.0]), max_steps=3)
    assert np.isnan(few).all()


def test_sir_likelihood_is_binomial_of_the_ode_solution():
    task = sbi.get_task("sir")
    theta = task.sample_prior(3, seed=2)
    x_o = task.observation(1)[0]
    for t, ll in zip(theta, task.log_likelihood(theta, x_o)):
        infected = _scipy_solution(sir_rhs, [1e6 - 1, 1, 0], t, SIR_TIMES)[:-1, 1]
        ref = stats.binom(1000, np.clip(infected / 1e6, 0, 1)).logpmf(x_o).sum()
        np.testing.assert_allclose(ll, ref, rtol=1e-6)


def test_lotka_volterra_likelihood_is_lognormal_of_the_ode_solution():
    task = sbi.get_task("lotka_volterra")
    theta = task.true_parameters(1)
    x_o = task.observation(1)[0]
    u = _scipy_solution(lotka_volterra_rhs, [30.0, 1.0], theta[0], LV_TIMES)[:-1]
    mean = np.log(np.clip(np.concatenate([u[:, 0], u[:, 1]]), 1e-10, 1e4))
    ref = stats.lognorm(s=0.1, scale=np.exp(mean)).logpdf(x_o).sum()
    np.testing.assert_allclose(task.log_likelihood(theta, x_o)[0], ref, rtol=1e-6)
    # Observation noise: log(x / u) is N(0, 0.1^2); 20 values: |mean| < 4 * 0.1 / sqrt(20).
    assert abs(np.mean(np.log(x_o) - mean)) < 4 * 0.1 / np.sqrt(20)
