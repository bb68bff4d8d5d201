import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
# The tests' workers and CLI calls use a compilation cache of their own, not the user's.
os.environ.setdefault("TESTBED_JAX_CACHE", tempfile.mkdtemp(prefix="testbed-jax-cache-"))
