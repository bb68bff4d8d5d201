import atexit
import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
# The tests' workers and CLI calls use a compilation cache of their own, not the user's,
# removed when the test process ends.
if "TESTBED_JAX_CACHE" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="testbed-jax-cache-")
    os.environ["TESTBED_JAX_CACHE"] = _cache
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)
# ... and an index of the registries of their own (experiments.catalog), not the user's
if "TESTBED_CATALOG" not in os.environ:
    _catalog = tempfile.mkdtemp(prefix="testbed-catalog-")
    os.environ["TESTBED_CATALOG"] = _catalog
    atexit.register(shutil.rmtree, _catalog, ignore_errors=True)


import contextlib  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture
def scoped_registries():
    """What a test registers (agents, problem families, sweeps, metrics) is undone after it."""
    import agents
    from generative.registry import FAMILIES, SWEEPS
    from testbed.metrics.registry import METRICS

    with contextlib.ExitStack() as stack:
        for registry in (agents.AGENTS, FAMILIES, SWEEPS, METRICS):
            stack.enter_context(registry.scope())
        yield


@pytest.fixture(scope="module")
def one_torch_thread():
    """torch on one thread for a module's tests (skipped without torch); restored after."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
