"""Writing an evaluation's frames (``render_mode="rgb_array"``) to a video file.

Two writers are used, whichever is installed first: imageio with its ffmpeg plugin
(``pip install 'agilerl[video]'``), or OpenCV (``opencv-python-headless``, which the
``atari`` extra installs). Without either, :func:`open_video` refuses before any episode
is played, naming the extra to install.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

VIDEO_EXTRA_HINT = "pip install 'agilerl[video]'"


@runtime_checkable
class _ImageioWriter(Protocol):
    """imageio's writer, as used here."""

    def append_data(self, im: np.ndarray) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class _OpenCVWriter(Protocol):
    """OpenCV's ``VideoWriter``, as used here."""

    def write(self, image: NDArray[np.uint8]) -> object: ...

    def release(self) -> None: ...


class VideoError(ValueError):
    """No video writer is installed, or the video file cannot be written."""


def available_writer() -> str | None:
    """``imageio`` or ``opencv`` (the writer :func:`open_video` would use), or None."""
    if importlib.util.find_spec("imageio") and importlib.util.find_spec("imageio_ffmpeg"):
        return "imageio"
    if importlib.util.find_spec("cv2"):
        return "opencv"
    return None


class VideoWriter:
    """Frames (H x W x 3 uint8 RGB arrays) in, one video file out."""

    def __init__(self, path: Path, fps: float, backend: str) -> None:
        self.path, self.fps, self.backend = path, float(fps), backend
        self._writer: _ImageioWriter | _OpenCVWriter | None = None
        self.frames = 0

    def add(self, frame: object) -> None:
        image = np.asarray(frame)
        if image.ndim != 3 or image.shape[-1] not in (3, 4):
            raise VideoError(f"the environment rendered a frame of shape {image.shape}, not "
                             "an RGB image (height x width x 3)")
        image = np.ascontiguousarray(image[..., :3].astype(np.uint8, copy=False))
        if self._writer is None:
            self._writer = self._open(image)
        if self.backend == "imageio":
            assert isinstance(self._writer, _ImageioWriter)  # _open made one for the backend
            self._writer.append_data(image)
        else:
            assert isinstance(self._writer, _OpenCVWriter)  # _open made one for the backend
            self._writer.write(image[..., ::-1].copy())  # OpenCV wants BGR
        self.frames += 1

    def _open(self, first: np.ndarray) -> _ImageioWriter | _OpenCVWriter:
        try:
            if self.backend == "imageio":
                import imageio

                return imageio.get_writer(os.fspath(self.path), fps=self.fps)
            import cv2

            height, width = first.shape[:2]
            fourcc = cv2.VideoWriter_fourcc(*"mp4v")  # type: ignore[attr-defined]
            writer = cv2.VideoWriter(os.fspath(self.path), fourcc, self.fps, (width, height))
        except Exception as exc:  # noqa: BLE001 - a writer's own failure, reported as such
            raise VideoError(f"cannot write the video {self.path}: {exc}") from None
        if not writer.isOpened():
            raise VideoError(f"cannot write the video {self.path} (OpenCV could not open it; "
                             f"use a .mp4 name, or install imageio: {VIDEO_EXTRA_HINT})")
        return writer

    def close(self) -> None:
        if self._writer is None:
            return
        if self.backend == "imageio":
            assert isinstance(self._writer, _ImageioWriter)  # _open made one for the backend
            self._writer.close()
        else:
            assert isinstance(self._writer, _OpenCVWriter)  # _open made one for the backend
            self._writer.release()
        self._writer = None


def open_video(path: str | os.PathLike[str], fps: float) -> VideoWriter:
    """A writer for ``path``; refuses at once when no writer is installed or the folder
    it goes in does not exist."""
    target = Path(path)
    backend = available_writer()
    if backend is None:
        raise VideoError(f"--record needs a video writer, and none is installed: "
                         f"{VIDEO_EXTRA_HINT} (imageio and imageio-ffmpeg)")
    if not target.parent.is_dir():
        raise VideoError(f"cannot write the video {target}: folder {target.parent} does "
                         "not exist")
    return VideoWriter(target, fps, backend)
