"""A read-only web UI over run folders (``agilerl dashboard``): the runs list, a run's curves,
hyperparameters, lineage, manifest and checkpoints, and several runs compared on one chart.

The page is static (``static/``, plain JavaScript and SVG, shipped in the package); it polls a
small JSON API (:class:`~agilerl.dashboard.api.DashboardApp`) that reads run folders and never
writes to them, so a live run, a finished one and a copied one look the same.
"""

from agilerl.dashboard.api import DashboardApp, Response
from agilerl.dashboard.runs import RunsIndex
from agilerl.dashboard.server import DashboardServer

__all__ = ["DashboardApp", "DashboardServer", "Response", "RunsIndex"]
