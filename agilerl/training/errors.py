"""The training errors under the module users have imported them from; they live in
:mod:`agilerl.core.errors` (imported by every floor, so they sit below all of them)."""

from agilerl.core.errors import *  # noqa: F403
from agilerl.core.errors import __all__ as __all__
