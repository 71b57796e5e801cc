"""Checkpoint and agent files hold plain data only, so loading one cannot run code.

A ``torch.save`` file is a pickle, and unpickling an arbitrary pickle runs whatever callable
it names: a crafted checkpoint handed to ``--resume-from-checkpoint`` would run code as the
user. Files are therefore loaded with ``torch.load(weights_only=True)``, which rebuilds only
tensors, containers and the few numpy types allowed below (arrays of numbers, booleans or
strings, their dtypes and scalars: data, never behaviour).

The states agents produce hold two kinds of objects outside that set, converted here on the
way out and back on the way in, each as a one-key tagged dict:

* gymnasium spaces (``observation_space``/``action_space``): their constructor arguments
  (and the state of their sampling generator);
* numpy ``Generator`` objects: the name and state of their bit generator.

Anything else that is not plain data is refused when written (:func:`to_plain` raises
``TypeError`` naming where it sits), so every file agilerl writes is one it can read back.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, cast

import numpy as np
import torch
from gymnasium import spaces

from agilerl.core.value_types import Space

_SPACE_TAG = "__gymnasium_space__"
_GENERATOR_TAG = "__numpy_generator__"

#: Bit generators a saved numpy ``Generator`` may name (numpy's own, no others).
_BIT_GENERATORS: dict[str, type[np.random.BitGenerator]] = {cls.__name__: cls for cls in (
    np.random.PCG64, np.random.PCG64DXSM, np.random.MT19937, np.random.Philox,
    np.random.SFC64)}

#: dtype kinds of numpy arrays and scalars a file may hold: bool, integers, floats, complex,
#: bytes and str, and records of those (never ``object``, whose items would be arbitrary
#: Python objects).
_PLAIN_DTYPE_KINDS = frozenset("biufcSU")
_PLAIN_DTYPES = [*"?bBhHiIlLqQefdgFDGSU", [("record", "f4")]]

_LEAVES = (type(None), bool, int, float, complex, str, bytes, torch.Tensor, torch.dtype,
           torch.device, torch.Size)


def numpy_safe_globals() -> list[Callable[..., object]]:
    """What ``weights_only`` loading must allow to rebuild plain numpy arrays and scalars."""
    from numpy._core.multiarray import _reconstruct, scalar

    dtype_classes = {type(np.dtype(code)) for code in _PLAIN_DTYPES}
    return [_reconstruct, scalar, np.ndarray, np.dtype, *sorted(dtype_classes, key=str)]


def to_plain(obj: object, where: str = "state") -> object:
    """``obj`` with spaces and generators replaced by tagged dicts; ``TypeError`` (naming
    ``where`` inside ``obj``) for anything else that is not plain data."""
    if isinstance(obj, spaces.Space):
        return {_SPACE_TAG: _space_args(obj, where)}
    if isinstance(obj, np.random.Generator):
        return {_GENERATOR_TAG: obj.bit_generator.state}
    if isinstance(obj, Mapping):
        if type(obj) not in (dict, OrderedDict):  # both rebuilt by weights_only loading
            raise TypeError(f"{where} is a {type(obj).__name__}, not a dict: it cannot be "
                            "saved as plain data")
        items = {key: to_plain(value, f"{where}[{key!r}]") for key, value in obj.items()}
        return OrderedDict(items) if isinstance(obj, OrderedDict) else items
    if type(obj) in (list, tuple, set):
        assert isinstance(obj, list | tuple | set)
        return type(obj)(to_plain(value, f"{where}[{i}]") for i, value in enumerate(obj))
    if isinstance(obj, np.ndarray | np.generic | np.dtype):
        dtype = obj if isinstance(obj, np.dtype) else obj.dtype
        if not _plain_dtype(dtype):
            raise TypeError(f"{where} is a numpy value of dtype {dtype}: only numbers, "
                            "booleans and strings can be saved as plain data")
        return obj
    if type(obj) in _LEAVES or isinstance(obj, torch.Tensor):
        return obj
    raise TypeError(f"{where} is a {type(obj).__module__}.{type(obj).__qualname__}: it cannot "
                    "be saved as plain data (tensors, numbers, strings, lists and dicts)")


def _plain_dtype(dtype: np.dtype) -> bool:
    if dtype.fields is not None:  # a record: plain when every field is
        return all(_plain_dtype(field[0]) for field in dtype.fields.values())
    return dtype.kind in _PLAIN_DTYPE_KINDS


def from_plain(obj: object) -> object:
    """Undo :func:`to_plain`: rebuild the tagged spaces and generators inside ``obj``."""
    if isinstance(obj, dict):
        if len(obj) == 1 and _SPACE_TAG in obj:
            return _space(obj[_SPACE_TAG])
        if len(obj) == 1 and _GENERATOR_TAG in obj:
            return generator_from_state(obj[_GENERATOR_TAG])
        return type(obj)((key, from_plain(value)) for key, value in obj.items())
    if type(obj) in (list, tuple):
        assert isinstance(obj, list | tuple)
        return type(obj)(from_plain(value) for value in obj)
    return obj


def generator_from_state(state: Mapping[str, object]) -> np.random.Generator:
    """A numpy ``Generator`` in the saved ``bit_generator.state``."""
    name = state.get("bit_generator")
    if not isinstance(name, str) or name not in _BIT_GENERATORS:
        raise ValueError(f"unknown numpy bit generator {name!r}")
    bit_generator = _BIT_GENERATORS[name]()
    bit_generator.state = dict(state)  # numpy checks the keys it needs
    return np.random.Generator(bit_generator)


def _space_args(space: Space, where: str) -> dict[str, object]:
    """The arguments that rebuild ``space`` (the sampling generator's state included)."""
    args: dict[str, object]
    if isinstance(space, spaces.Box):
        args = {"low": space.low, "high": space.high, "dtype": space.dtype.str}
    elif isinstance(space, spaces.Discrete):
        args = {"n": int(space.n), "start": int(space.start)}
    elif isinstance(space, spaces.MultiDiscrete):
        args = {"nvec": space.nvec, "start": space.start, "dtype": space.dtype.str}
    elif isinstance(space, spaces.MultiBinary):
        args = {"n": space.n if isinstance(space.n, int) else list(space.n)}
    elif isinstance(space, spaces.Dict):
        args = {"spaces": {k: to_plain(v, f"{where}[{k!r}]") for k, v in space.spaces.items()}}
    elif isinstance(space, spaces.Tuple):
        args = {"spaces": [to_plain(v, f"{where}[{i}]") for i, v in enumerate(space.spaces)]}
    else:
        raise TypeError(f"{where} is a gymnasium {type(space).__name__} space, which agilerl "
                        "cannot save (Box, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple)")
    # The generator is created lazily by gymnasium; only a started one has a state to keep.
    rng = space._np_random
    args["rng"] = None if rng is None else rng.bit_generator.state
    return {"type": type(space).__name__, **args}


def _space(args: Mapping[str, Any]) -> Space:
    # A tagged record written by _space_args: which keys it holds, and their types,
    # depend on its "type".
    kind = args.get("type")
    space: Space
    if kind == "Box":
        space = spaces.Box(low=args["low"], high=args["high"], dtype=np.dtype(args["dtype"]))
    elif kind == "Discrete":
        space = spaces.Discrete(int(args["n"]), start=int(args["start"]))
    elif kind == "MultiDiscrete":
        space = spaces.MultiDiscrete(args["nvec"], dtype=np.dtype(args["dtype"]),
                                     start=args["start"])
    elif kind == "MultiBinary":
        space = spaces.MultiBinary(args["n"])
    elif kind == "Dict":
        space = spaces.Dict({k: cast(Space, from_plain(v)) for k, v in args["spaces"].items()})
    elif kind == "Tuple":
        space = spaces.Tuple([cast(Space, from_plain(v)) for v in args["spaces"]])
    else:
        raise ValueError(f"unknown saved space type {kind!r}")
    if args.get("rng") is not None:
        space._np_random = generator_from_state(args["rng"])
    return space
