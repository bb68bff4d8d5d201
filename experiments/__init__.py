"""The command line and runnable experiments that reproduce the papers' figures."""
