"""The one error type routes raise; rendered as ``{"ok": false, "error", "error_code"}``."""

from __future__ import annotations


class ApiError(Exception):
    """An HTTP error with a stable machine code (spec arena-api §9.1)."""

    def __init__(self, status: int, code: str, message: str, **extras: object) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extras = extras

    def body(self) -> dict[str, object]:
        return {"ok": False, "error": self.message, "error_code": self.code, **self.extras}


def not_found(what: str, name: object) -> ApiError:
    return ApiError(404, f"{what.upper()}_NOT_FOUND", f"{what.capitalize()} '{name}' not found")


def invalid_state(name: str, state: str, action: str) -> ApiError:
    return ApiError(
        409,
        "INVALID_STATE",
        f"Experiment '{name}' is {state}; cannot {action} it",
        state=state,
    )
