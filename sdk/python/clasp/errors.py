"""Errors raised by the clasp client.

Every answer outside 2xx is raised as a ClaspError (or a subclass) carrying
the HTTP status, the server's stable ``code``, its ``details`` and the
request id (RULES.md, Errors and requests). A request that got no HTTP
answer at all raises ConnectionFailed.
"""

from typing import Any, Dict, Mapping, Optional


class ClaspError(Exception):
    """An error answer of the server: ``status`` (HTTP), ``code`` (stable,
    snake_case: match on it), ``message`` (a sentence for people),
    ``details`` (facts about the failure) and ``request_id``."""

    def __init__(
        self,
        message: str,
        status: Optional[int] = None,
        code: str = "",
        details: Optional[Mapping[str, Any]] = None,
        request_id: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.details: Dict[str, Any] = dict(details or {})
        self.request_id = request_id

    def __str__(self) -> str:
        where = f"{self.status} {self.code}" if self.status else self.code
        return f"{self.message} ({where})" if where else self.message


class Conflict(ClaspError):
    """A 409 other than run_not_live: the issue is held by another run
    (checkout_conflict), written by another holder (ownership_conflict), ...
    ``holder_run_id``, ``holder_agent_id`` and ``reason`` name the holder
    (held_by_live_run, assigned_to_other_agent, status_not_expected).
    A 409 is never retried."""

    @property
    def holder_run_id(self) -> Optional[str]:
        return self.details.get("checkoutRunId") or self.details.get("executionRunId")

    @property
    def holder_agent_id(self) -> Optional[str]:
        return self.details.get("assigneeAgentId")

    @property
    def reason(self) -> Optional[str]:
        return self.details.get("reason")


class RunNotLive(ClaspError):
    """409 run_not_live: the run this call acts in has ended or was lost
    (its lease ran out); it holds nothing any more."""


class Unauthorized(ClaspError):
    """401: the credential is missing, wrong, revoked, or a run token whose
    run has ended."""


class RateLimited(ClaspError):
    """429 rate_limited: ``retry_after`` is how many seconds the server said
    to wait (its Retry-After)."""

    def __init__(self, *args: Any, retry_after: float = 1.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_after = retry_after


class ConnectionFailed(ClaspError):
    """No HTTP answer (connection refused or reset, timeout): the request
    may or may not have reached the server."""


def error_from_answer(
    status: int, body: Any, headers: Mapping[str, str], fallback: str
) -> ClaspError:
    """Builds the ClaspError of a non-2xx answer."""
    message, code, details = fallback, "", {}  # type: str, str, Dict[str, Any]
    if isinstance(body, dict) and isinstance(body.get("code"), str):
        message = str(body.get("error") or fallback)
        code = body["code"]
        if isinstance(body.get("details"), dict):
            details = body["details"]
    else:
        code = "internal" if status >= 500 else "not_clasp"
    request_id = headers.get("X-Request-Id") or details.get("requestId")
    kw: Dict[str, Any] = dict(status=status, code=code, details=details, request_id=request_id)
    if status == 429:
        retry = 1.0
        try:
            retry = float(headers.get("Retry-After") or details.get("retryAfterSeconds") or 1)
        except (TypeError, ValueError):
            pass
        return RateLimited(message, retry_after=max(retry, 0.0), **kw)
    if status == 401:
        return Unauthorized(message, **kw)
    if status == 409 and code == "run_not_live":
        return RunNotLive(message, **kw)
    if status == 409:
        return Conflict(message, **kw)
    return ClaspError(message, **kw)
