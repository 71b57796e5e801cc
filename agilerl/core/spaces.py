"""Observation batches (numpy, from a vector env) -> the arrays/tensors the networks take.

* Vector spaces (Box, MultiBinary) are flattened to float32 ``(batch, dim)``; Discrete
  ones one-hot encoded.
* Images (a 3-D Box) keep their shape and dtype (uint8 stays uint8: the CNN encoder
  scales it, once, on the network's device).
* Composite spaces (Tuple/Dict) become one numpy *structured* array of shape ``(batch,)``
  with a field per part (named by the Dict key, or the Tuple index as a string): images
  in their own dtype and shape, Discrete parts as int64 indices (the multi-input encoder
  one-hot encodes them), vector parts as flat float32. Buffers store that array as one
  field per transition, so their slicing, sampling and checkpoints need not know the
  structure; ``to_tensor`` splits it back into a dict of tensors (part name -> batch).

``storable(obs)`` is what replay memory keeps: the raw batch for simple spaces (compact,
e.g. integer states, uint8 images), the structured array for composite ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias, cast, overload

import numpy as np
import torch
from gymnasium import spaces
from numpy.typing import ArrayLike

from agilerl.core.value_types import Observation, Space

NetworkInput: TypeAlias = torch.Tensor | dict[str, torch.Tensor]
"""What :class:`ObsEncoder` hands a network: a tensor batch, or for composite spaces a dict
(part name -> tensor batch)."""


class IncompatibleSpaceError(ValueError):
    """An algorithm or network cannot work with an environment's space (DQN on a Box)."""


def is_image_space(space: object) -> bool:
    """A 3-D Box: an image, channels first or last."""
    return isinstance(space, spaces.Box) and len(space.shape) == 3


def composite_parts(space: object) -> list[tuple[int | str, Space]] | None:
    """``(key, subspace)`` pairs of a Tuple (index keys) or Dict space; None otherwise."""
    if isinstance(space, spaces.Tuple):
        return list(enumerate(space.spaces))
    if isinstance(space, spaces.Dict):
        return list(space.spaces.items())
    return None


def vector_width(space: Space | int, encoder: str) -> int:
    """Width of a flat vector observation for ``encoder`` (its arch name); an image or
    composite space is refused with :class:`IncompatibleSpaceError` naming the encoder."""
    if is_image_space(space) or composite_parts(space) is not None:
        raise IncompatibleSpaceError(
            f"the {encoder} encoder takes flat vector observations, not {space}")
    return flat_dim(space)


def flat_dim(space: Space | int) -> int:
    """Width of ``space`` flattened (Discrete: one-hot width; an int is its own width)."""
    if isinstance(space, (int, np.integer)):
        return int(space)
    parts = composite_parts(space)
    if parts is not None:
        return sum(flat_dim(s) for _, s in parts)
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, (spaces.Box, spaces.MultiBinary)):
        return int(np.prod(space.shape))
    raise NotImplementedError(
        f"observation space {type(space).__name__} is not supported yet "
        "(Box, Discrete, MultiBinary and Tuple/Dict of them are)"
    )


def _part_field(space: Space) -> tuple[np.dtype[np.generic], tuple[int, ...]]:
    """(dtype, shape) of one part's field in the structured batch."""
    if is_image_space(space):
        return np.dtype(space.dtype), tuple(space.shape or ())
    if isinstance(space, spaces.Discrete):
        return np.dtype(np.int64), ()
    if composite_parts(space) is not None:
        raise NotImplementedError("nested Tuple/Dict observation spaces are not supported yet")
    return np.dtype(np.float32), (flat_dim(space),)


def _part_rows(space: Space, obs: ArrayLike) -> np.ndarray:
    if isinstance(space, spaces.Discrete):
        return np.asarray(obs, dtype=np.int64).reshape(-1) - int(space.start)
    if is_image_space(space):
        return np.asarray(obs)
    return np.asarray(obs, dtype=np.float32).reshape(len(np.asarray(obs)), -1)


def _part(obs: object, key: int | str) -> ArrayLike:
    """``obs[key]``: a Dict space's part batch by name (from a dict, or a structured array's
    field), a Tuple space's by index."""
    if isinstance(obs, Mapping | np.ndarray):
        return obs[key]
    if isinstance(obs, Sequence) and isinstance(key, int):
        return obs[key]
    raise TypeError(f"a {type(obs).__name__} batch has no part {key!r}")


class ObsEncoder:
    """Turns batched observations of ``space`` into network inputs (see module docs)."""

    def __init__(self, space: Space):
        self.space = space
        self.parts = composite_parts(space)
        self.image = is_image_space(space)
        self._discrete = isinstance(space, spaces.Discrete)
        self.dtype: np.dtype
        if self.parts is not None:
            self.dtype = np.dtype(
                [(str(k), *_part_field(s)) for k, s in self.parts]  # type: ignore[misc]
            )
            self.shape: tuple[int, ...] = ()
            self.dim = flat_dim(space)
        elif self.image:
            self.dtype, self.shape = np.dtype(space.dtype), tuple(space.shape)  # type: ignore[arg-type]
            self.dim = flat_dim(space)
        else:
            self.dim = flat_dim(space)
            self.dtype, self.shape = np.dtype(np.float32), (self.dim,)

    @property
    def composite(self) -> bool:
        return self.parts is not None

    def numpy(self, obs: Observation | ArrayLike | Mapping[str, ArrayLike]) -> np.ndarray:
        """The network input batch as one array: rows of ``shape`` and ``dtype``. A batch
        already in that form is returned as it is (``numpy(numpy(x))`` = ``numpy(x)``)."""
        if self.parts is not None:
            if isinstance(obs, np.ndarray) and obs.dtype == self.dtype:
                return obs  # already structured (from memory)
            columns = [_part_rows(s, _part(obs, k)) for k, s in self.parts]
            out = np.empty(len(columns[0]), dtype=self.dtype)
            for (k, _), column in zip(self.parts, columns, strict=True):
                out[str(k)] = column
            return out
        if self._discrete:
            given = np.asarray(obs)
            if given.ndim == 2 and given.shape[1] == self.dim and given.dtype == np.float32:
                return given  # already one-hot (a rollout's stored batch)
            index = given.astype(np.int64).reshape(-1) - int(self.space.start)  # type: ignore[attr-defined]
            return np.eye(self.dim, dtype=np.float32)[index]
        if self.image:
            return np.asarray(obs, dtype=self.dtype).reshape(-1, *self.shape)
        return np.asarray(obs, dtype=np.float32).reshape(-1, self.dim)

    def storable(self, obs: Observation | ArrayLike | Mapping[str, ArrayLike]) -> np.ndarray:
        """What replay memory keeps for a batch of observations."""
        return self.numpy(obs) if self.parts is not None else np.asarray(obs)

    def __call__(self, obs: Observation | ArrayLike | Mapping[str, ArrayLike],
                 device: torch.device) -> NetworkInput:
        """A tensor, or for composite spaces a dict (part name -> tensor), on ``device``."""
        batch = self.numpy(obs)
        if self.parts is None:
            return torch.as_tensor(batch, device=device)
        return {
            name: torch.as_tensor(np.ascontiguousarray(batch[name]), device=device)
            for name in batch.dtype.names or ()
        }


@overload
def obs_cat(batches: Sequence[torch.Tensor]) -> torch.Tensor: ...
@overload
def obs_cat(batches: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]: ...
@overload
def obs_cat(batches: Sequence[NetworkInput]) -> NetworkInput: ...
def obs_cat(batches: Sequence[NetworkInput]) -> NetworkInput:
    """Concatenate observation batches (tensors, or dicts of tensors) along the batch."""
    # The batches are of one kind (one space's encoding): the first one's.
    first = batches[0]
    if isinstance(first, dict):
        dicts = cast("Sequence[dict[str, torch.Tensor]]", batches)
        return {k: torch.cat([b[k] for b in dicts]) for k in first}
    return torch.cat(list(cast("Sequence[torch.Tensor]", batches)))


@overload
def obs_index(obs: torch.Tensor, index: torch.Tensor | np.ndarray | slice) -> torch.Tensor: ...
@overload
def obs_index(obs: dict[str, torch.Tensor],
              index: torch.Tensor | np.ndarray | slice) -> dict[str, torch.Tensor]: ...
@overload
def obs_index(obs: NetworkInput, index: torch.Tensor | np.ndarray | slice) -> NetworkInput: ...
def obs_index(obs: NetworkInput, index: torch.Tensor | np.ndarray | slice) -> NetworkInput:
    """Rows ``index`` of an observation batch (a tensor, or a dict of tensors)."""
    if isinstance(obs, dict):
        return {k: v[index] for k, v in obs.items()}
    return obs[index]


def action_dim(space: Space) -> int:
    """Output width of a policy/Q head for ``space``."""
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.Box):
        return int(np.prod(space.shape))
    raise NotImplementedError(f"action space {type(space).__name__} is not supported yet")
