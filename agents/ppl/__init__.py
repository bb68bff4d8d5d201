"""PPL agents: the conjugate problem's own model written in each PPL, sampled by its NUTS.

`pymc`, `nutpie` (PyMC models), `pyro`, `stan` (PyStan 3), `blackjax`, and `numpyro` (the
`nuts` agent at the benchmark's settings). The PPLs come with the extra `[ppl]` and are
imported only when an agent runs; without them, an agent says which extra to install.
"""

from agents.ppl import (  # noqa: F401  (importing registers the agents)
    blackjax_agent,
    numpyro_agent,
    pymc_agent,
    pyro_agent,
    stan_agent,
)
