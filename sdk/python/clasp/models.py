"""The server's answers as dataclasses.

Field names are the JSON's in snake_case (``checkoutEpoch`` is
``checkout_epoch``); times stay RFC 3339 strings. Fields this version does
not know are kept in ``extra`` (by their JSON name), so a newer server never
breaks an older client.
"""

import dataclasses
import functools
import re
from datetime import datetime, timezone
from typing import Any, Dict, FrozenSet, List, Optional, Type, TypeVar

T = TypeVar("T")

_camel = re.compile(r"(?<!^)(?=[A-Z])")


@functools.lru_cache(maxsize=512)
def _snake(name: str) -> str:
    return _camel.sub("_", name).lower()


@functools.lru_cache(maxsize=None)
def _fields(cls: type) -> FrozenSet[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def from_json(cls: Type[T], data: Dict[str, Any]) -> T:
    """Builds a dataclass from a JSON object; unknown fields go to extra."""
    known = _fields(cls)
    kwargs: Dict[str, Any] = {}
    extra: Dict[str, Any] = {}
    for k, v in data.items():
        s = _snake(k)
        if s in known and s != "extra":
            kwargs[s] = v
        else:
            extra[k] = v
    kwargs["extra"] = extra
    return cls(**kwargs)


def parse_time(s: Optional[str]) -> Optional[datetime]:
    """Parses the server's RFC 3339 times (nanoseconds and Z included)."""
    if not s:
        return None
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", s)
    if not m:
        return None
    frac = (m.group(2) or ".0")[1:7].ljust(6, "0")
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.fromisoformat(f"{m.group(1)}.{frac}{tz}").astimezone(timezone.utc)


@dataclasses.dataclass
class Issue:
    """An issue and its locks. ``checkout_epoch`` is the fencing token."""

    id: str = ""
    company_id: str = ""
    identifier: str = ""
    title: str = ""
    description: str = ""
    status: str = ""
    priority: str = ""
    assignee_agent_id: Optional[str] = None
    checkout_run_id: Optional[str] = None
    checkout_epoch: int = 0
    execution_run_id: Optional[str] = None
    execution_agent_name_key: Optional[str] = None
    execution_locked_at: Optional[str] = None
    started_at: Optional[str] = None
    completed_at: Optional[str] = None
    cancelled_at: Optional[str] = None
    created_at: str = ""
    updated_at: str = ""
    # Sent by servers that model dependencies and workspaces; empty or None
    # otherwise.
    blocked_by: List[Any] = dataclasses.field(default_factory=list)
    dependency_ready: Optional[bool] = None
    workspace: Optional[Dict[str, Any]] = None
    extra: Dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class RunInfo:
    """A run as the server answers it. ``run_token`` is only in the answer
    that opened it."""

    id: str = ""
    company_id: str = ""
    agent_id: str = ""
    status: str = ""
    invocation_source: str = ""
    issue_id: Optional[str] = None
    retry_of_run_id: Optional[str] = None
    attempt: int = 1
    pid: Optional[int] = None
    host_id: Optional[str] = None
    lease_expires_at: Optional[str] = None
    last_sign_of_life_at: Optional[str] = None
    started_at: Optional[str] = None
    finished_at: Optional[str] = None
    exit_code: Optional[int] = None
    error_code: Optional[str] = None
    error: Optional[str] = None
    created_at: str = ""
    run_token: Optional[str] = None
    extra: Dict[str, Any] = dataclasses.field(default_factory=dict)

    def lease_ttl(self, default: float = 60.0) -> float:
        """The lease the server grants a sign of life, in seconds."""
        end = parse_time(self.lease_expires_at)
        start = parse_time(self.last_sign_of_life_at or self.started_at)
        if end and start and end > start:
            return (end - start).total_seconds()
        return default


@dataclasses.dataclass
class Comment:
    id: str = ""
    issue_id: str = ""
    body: str = ""
    author_agent_id: Optional[str] = None
    author_board: bool = False
    run_id: Optional[str] = None
    created_at: str = ""
    extra: Dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Agent:
    id: str = ""
    company_id: str = ""
    name: str = ""
    status: str = ""
    extra: Dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Event:
    """An activity row of the event stream; ``id`` is what Last-Event-ID
    resumes after."""

    id: int = 0
    company_id: str = ""
    actor_type: str = ""
    actor_id: str = ""
    run_id: Optional[str] = None
    request_id: Optional[str] = None
    action: str = ""
    entity_type: str = ""
    entity_id: str = ""
    details: Dict[str, Any] = dataclasses.field(default_factory=dict)
    created_at: str = ""
    extra: Dict[str, Any] = dataclasses.field(default_factory=dict)
