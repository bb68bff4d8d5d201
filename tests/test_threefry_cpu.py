"""testbed's unrolled threefry lowering on the CPU: in use, and JAX's bits exactly."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from testbed import threefry_cpu  # installed by conftest, as the entry points install it

DRAWS = """
import sys
import jax, jax.numpy as jnp, numpy as np
import testbed
from testbed import threefry_cpu

def draws():
    key = jax.random.PRNGKey(7)
    keys = jax.random.split(key, 5)
    return {
        "normal": jax.jit(jax.vmap(lambda k: jax.random.normal(k, (2802,))))(keys),
        "uniform": jax.jit(lambda k: jax.random.uniform(k, (3, 7)))(key),
        "bits_odd": jax.jit(lambda k: jax.random.bits(k, (1001,)))(key),
        "fold_in": jax.jit(jax.vmap(lambda i: jax.random.fold_in(key, i)))(jnp.arange(50)),
        "split": jax.jit(lambda k: jax.random.split(k, 9))(key),
        "permutation": jax.jit(lambda k: jax.random.permutation(k, 300))(key),
    }

def has_loop():
    lowered = jax.jit(lambda k: jax.random.bits(k, (8,))).lower(jax.random.PRNGKey(0))
    return "stablehlo.while" in lowered.as_text()
"""


def _run_rolled(path) -> list[str]:
    """The draws under JAX's own CPU lowering (TESTBED_THREEFRY=rolled), in a fresh process."""
    code = DRAWS + (
        "\nnp.savez(sys.argv[1], **{k: np.asarray(v) for k, v in draws().items()})"
        "\nprint(threefry_cpu.lowering(), has_loop())"
    )
    env = {**os.environ, threefry_cpu.ENV: "rolled"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def _jax_offers_unrolled() -> bool:
    try:
        from jax._src.random import threefry2x32 as impl
    except ImportError:
        return False
    return hasattr(impl, "_threefry2x32_lowering_rule") and hasattr(impl, "threefry2x32_p")


def test_unrolled_lowering_in_use_and_bits_equal_jax_own(tmp_path):
    ns: dict = {}
    exec(DRAWS, ns)
    if not _jax_offers_unrolled():  # a JAX without the registration keeps its own lowering
        assert threefry_cpu.lowering() == "rolled"
        return
    assert threefry_cpu.lowering() == "unrolled"
    assert not ns["has_loop"]()  # the rounds are unrolled: no loop in the program
    ours = {k: np.asarray(v) for k, v in ns["draws"]().items()}
    assert _run_rolled(tmp_path / "rolled.npz") == ["rolled", "True"]
    with np.load(tmp_path / "rolled.npz") as rolled:
        assert set(rolled.files) == set(ours)
        for name in ours:
            np.testing.assert_array_equal(ours[name], rolled[name], err_msg=name)


def test_the_lowering_is_checked_on_this_jax():
    """The registration is JAX-internal: a JAX version not in VALID_JAX fails here, so an
    upgrade is checked (this file's bits test) before VALID_JAX names it."""
    import jax

    assert jax.__version__ in threefry_cpu.VALID_JAX, (
        f"JAX {jax.__version__} is not among the versions the unrolled threefry lowering "
        f"was checked on ({', '.join(threefry_cpu.VALID_JAX)}): run this file's tests, "
        "then add it to testbed.threefry_cpu.VALID_JAX"
    )


@pytest.mark.parametrize(
    "code",
    [  # an import installs nothing; the library's entry points install it
        "import testbed\nfrom testbed import threefry_cpu\nprint(threefry_cpu.lowering())\n"
        "print(threefry_cpu.install())",
        "import generative, testbed, agents\nfrom testbed import threefry_cpu\n"
        "print(threefry_cpu.lowering())\ngenerative.load('coin/1')\n"
        "print(threefry_cpu.lowering())",
    ],
    ids=["import", "generative.load"],
)
def test_the_lowering_is_installed_by_entry_points_not_by_an_import(code):
    """The lowering is one explicit call of the entry points (the command line, workers,
    scripts, `generative.load`, `testbed.evaluate`), not an import side effect."""
    env = {k: v for k, v in os.environ.items() if k != threefry_cpu.ENV}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    installed = "unrolled" if _jax_offers_unrolled() else "rolled"
    assert out.stdout.split() == ["rolled", installed]


def test_a_bad_setting_warns_naming_the_variable_and_choices(monkeypatch):
    monkeypatch.setenv(threefry_cpu.ENV, "fast")
    with pytest.warns(UserWarning, match="TESTBED_THREEFRY: got 'fast'.*unrolled, rolled"):
        assert threefry_cpu.install() == ("unrolled" if _jax_offers_unrolled() else "rolled")


def test_the_stored_programs_key_names_the_lowering():
    from testbed import compilation_cache

    assert f"threefry={threefry_cpu.lowering()}" in compilation_cache._machine()
