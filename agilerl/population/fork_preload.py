"""Imported once by the fork server that worker processes fork from (never by the driver).

It imports what every worker needs (the agent's module and the member trainer factory's
are preloaded before it), then moves everything allocated so far into the
garbage collector's permanent generation (``gc.freeze``), so collections in the workers do
not touch, and thereby copy, the pages they share with the fork server.
"""

import gc

import gymnasium  # noqa: F401
import torch  # noqa: F401

import agilerl.envs  # noqa: F401
import agilerl.population.backends  # noqa: F401
import agilerl.population.pool_worker  # noqa: F401

gc.freeze()
