"""Which of the server's environment variables reach the processes it starts (jobs, pip):
an allow-list, so credentials kept in the server's environment stay with the server."""

from __future__ import annotations

import os

#: server environment variables a child process inherits (besides ``LC_*``).
PASSED_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "LD_LIBRARY_PATH",
              "CUDA_VISIBLE_DEVICES", "VIRTUAL_ENV", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
              "SSL_CERT_FILE", "SSL_CERT_DIR")


def passed_env() -> dict[str, str]:
    """The server's variables a child process inherits: those of :data:`PASSED_ENV` and
    the locale's ``LC_*``."""
    return {k: v for k, v in os.environ.items() if k in PASSED_ENV or k.startswith("LC_")}
