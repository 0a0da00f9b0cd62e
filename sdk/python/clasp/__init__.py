"""Python client of the clasp coordination server (standard library only).

    import clasp

    client = clasp.Client()            # CLASP_URL, CLASP_API_KEY, ...
    with client.run() as run:          # opens a run and heartbeats it
        issue = run.claim()            # None when nothing is free
        if issue:
            run.update(issue.id, status="done", comment="fixed")

See Client, Run and the errors (ClaspError, Conflict, RunNotLive,
Unauthorized, RateLimited, ConnectionFailed); clasp.aio is the asyncio
flavour.
"""

from .client import DEFAULT_URL, Client, Run
from .errors import ClaspError, Conflict, ConnectionFailed, RateLimited, RunNotLive, Unauthorized
from .models import Agent, Comment, Event, Issue, RunInfo

__version__ = "0.1.0"

__all__ = [
    "Agent", "ClaspError", "Client", "Comment", "Conflict", "ConnectionFailed", "DEFAULT_URL", "Event",
    "Issue", "RateLimited", "Run", "RunInfo", "RunNotLive", "Unauthorized",
]
