"""JAX's threefry random bits compiled unrolled on the CPU: the same bits, about 4x faster.

On the CPU, JAX lowers its threefry2x32 generator as a loop of five iterations of four
rounds, which keeps programs small but stops XLA from fusing the rounds: each iteration
streams its arrays through memory. JAX's unrolled lowering (the one it uses on other
backends) fuses into one pass and gives the same bits, 1.4-4x faster here (a Gaussian value
in 5 ns instead of 21 on JAX's default stream). Drawing noise bounds `sgmcmc`'s chain.
A program around the draws may be fused differently, so its floats can differ from JAX's
lowering by rounding (a trained `hypermodel`'s KL by 1e-4 relative; `sgmcmc`'s and `bbb`'s
not at all on the problem checked).

Installed once per process by one explicit call, `install()`, which the entry points make
(the `testbed` command, the reproduction scripts, the benchmarks, the tests), for every JAX
program the process lowers after that. A library call that builds or runs a problem
(`generative.load`, `testbed.evaluate`, `evaluate_many`) and a sweep's worker at its start
call `ensure_installed()`, a flag check once it is installed, so a library user who never
calls an entry point gets it too. `TESTBED_THREEFRY=rolled` keeps JAX's CPU lowering. It
uses a JAX-internal registration, checked on the JAX versions of VALID_JAX
(tests/test_threefry_cpu.py fails on another, so an upgrade is checked again); a JAX without
it keeps its own lowering (`lowering()` says which is in use).
"""

from __future__ import annotations

import warnings

from testbed import settings

ENV = settings.THREEFRY
# JAX versions whose internal registration and bits tests/test_threefry_cpu.py checked
VALID_JAX = ("0.10.2",)
_state = {"lowering": "rolled", "installed": False}


def _register_unrolled() -> bool:
    """Registers JAX's unrolled threefry lowering for the CPU; False if this JAX lacks it."""
    try:
        from jax._src.interpreters import mlir
        from jax._src.random import threefry2x32 as impl

        rule = impl._threefry2x32_lowering_rule
        mlir.register_lowering(impl.threefry2x32_p, rule, platform="cpu")
    except (ImportError, AttributeError):
        return False
    return True


def install(chosen: settings.Settings | None = None) -> str:
    """Uses the unrolled lowering on the CPU unless `TESTBED_THREEFRY=rolled` (in `chosen`,
    default: the settings in force); returns the lowering in use. An entry point's call,
    once per process; another call is harmless (the lowering is registered once)."""
    chosen = settings.current() if chosen is None else chosen
    if chosen.threefry_refused:  # a warning, not an error: the bits are the same either way
        warnings.warn(chosen.threefry_refused, stacklevel=2)
    choice = chosen.threefry
    if choice == "unrolled" and _state["lowering"] != "unrolled" and _register_unrolled():
        _state["lowering"] = "unrolled"
    _state["installed"] = True
    return _state["lowering"]


def ensure_installed() -> str:
    """`install()` unless this process has installed the lowering already (then a flag
    check): what library calls make, for users who call no entry point."""
    return _state["lowering"] if _state["installed"] else install()


def lowering() -> str:
    """The CPU lowering of threefry this process uses: 'unrolled' or 'rolled'."""
    return _state["lowering"]
