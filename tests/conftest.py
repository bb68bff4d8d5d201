import atexit
import contextlib
import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
# The tests' workers and CLI calls use a compilation cache of their own, not the user's:
# `<cache home>/testbed/jax-tests`, kept between runs, so a run compiles only the programs
# that changed since the last one (a cold run compiled for about half of the suite's CPU
# time). Compiled programs are the same code: no number changes. Emptied when it outgrows
# TESTS_CACHE_BYTES. TESTBED_TEST_CACHE=fresh: a temporary folder, removed at the end (a
# cold run, as on a fresh clone); TESTBED_JAX_CACHE set by the caller is used as it is.
TESTS_CACHE_BYTES = 2 * 1024**3


def _folder_bytes(folder: str) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _tests_cache() -> str:
    if os.environ.get("TESTBED_TEST_CACHE", "").strip().lower() == "fresh":
        cache = tempfile.mkdtemp(prefix="testbed-jax-cache-")
        atexit.register(shutil.rmtree, cache, ignore_errors=True)
        return cache
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    cache = os.path.join(home, "testbed", "jax-tests")
    if os.path.isdir(cache) and _folder_bytes(cache) > TESTS_CACHE_BYTES:
        shutil.rmtree(cache, ignore_errors=True)
    try:
        os.makedirs(cache, exist_ok=True)
    except OSError:  # no writable cache home: a temporary folder, as before
        cache = tempfile.mkdtemp(prefix="testbed-jax-cache-")
        atexit.register(shutil.rmtree, cache, ignore_errors=True)
    return cache


if "TESTBED_JAX_CACHE" not in os.environ:  # set once, by the first process (xdist's
    os.environ["TESTBED_JAX_CACHE"] = _tests_cache()  # controller); workers inherit it
# ... and an index of the registries of their own (experiments.catalog), not the user's
if "TESTBED_CATALOG" not in os.environ:
    _catalog = tempfile.mkdtemp(prefix="testbed-catalog-")
    os.environ["TESTBED_CATALOG"] = _catalog
    atexit.register(shutil.rmtree, _catalog, ignore_errors=True)

# the unrolled threefry lowering, as every entry point installs it (the numbers pinned here
# are the command line's)
from testbed import threefry_cpu  # noqa: E402

threefry_cpu.install()

import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def compiled_programs_kept():
    """Each test process compiles into the tests' cache from its first test on, not from
    its first library call (testbed.evaluate, a metric): agents train, samplers run and
    loops compile before any such call."""
    from testbed import compilation_cache

    compilation_cache.configure_once()
    yield


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
