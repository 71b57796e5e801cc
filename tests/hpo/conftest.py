"""HPO tests use the algorithm tests' small networks and single-threaded torch."""

from tests.algorithms.conftest import SMALL_NET, small_net  # noqa: F401
