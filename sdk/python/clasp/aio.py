"""asyncio flavour of the client, without dependencies: each call runs the
synchronous client in a worker thread (asyncio.to_thread), so the event
loop never blocks; the heartbeat is the synchronous Run's thread.

    async with clasp.aio.Client() as client:
        async with client.run() as run:
            issue = await run.claim()
"""

import asyncio
import functools
from types import TracebackType
from typing import Any, AsyncIterator, Callable, List, Optional, Sequence, Type

from . import client as _sync
from .models import Comment, Event, Issue, RunInfo

__all__ = ["Client", "Run"]


class Run:
    """The asyncio face of a clasp.Run."""

    def __init__(self, run: _sync.Run) -> None:
        self.sync = run

    @property
    def id(self) -> str:
        return self.sync.id

    @property
    def token(self) -> Optional[str]:
        return self.sync.token

    async def __aenter__(self) -> "Run":
        await asyncio.to_thread(self.sync.__enter__)
        return self

    async def __aexit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        await asyncio.to_thread(self.sync.__exit__, et, ev, tb)

    async def checkout(self, ref: str, expected_statuses: Sequence[str] = ("todo",)) -> Issue:
        return await asyncio.to_thread(self.sync.checkout, ref, expected_statuses)

    async def claim(self, scope: str = "any", expected_statuses: Optional[Sequence[str]] = None) -> Optional[Issue]:
        return await asyncio.to_thread(self.sync.claim, scope, expected_statuses)

    async def comment(self, ref: str, body: str, idempotency_key: Optional[str] = None) -> Comment:
        return await asyncio.to_thread(self.sync.comment, ref, body, idempotency_key)

    async def update(self, ref: str, status: Optional[str] = None, comment: Optional[str] = None,
                     idempotency_key: Optional[str] = None, **fields: Any) -> Issue:
        return await asyncio.to_thread(functools.partial(self.sync.update, ref, status, comment,
                                                         idempotency_key, **fields))

    async def release(self, ref: str, unassign: bool = False) -> Issue:
        return await asyncio.to_thread(self.sync.release, ref, unassign)

    async def heartbeat(self) -> RunInfo:
        return await asyncio.to_thread(self.sync.heartbeat)


class Client:
    """The asyncio face of clasp.Client; takes the same arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.sync = _sync.Client(*args, **kwargs)

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        return None

    def run(self, invocation_source: str = "sdk") -> Run:
        return Run(self.sync.run(invocation_source))

    async def issue(self, ref: str) -> Issue:
        return await asyncio.to_thread(self.sync.issue, ref)

    async def comments(self, ref: str) -> List[Comment]:
        return await asyncio.to_thread(self.sync.comments, ref)

    async def events(self, company_id: Optional[str] = None,
                     last_event_id: Optional[int] = None) -> AsyncIterator[Event]:
        """The event stream as an async iterator (a thread reads it)."""
        it = await asyncio.to_thread(self.sync.events, company_id, last_event_id)
        done = object()
        try:
            while True:
                ev = await asyncio.to_thread(next, it, done)
                if ev is done:
                    return
                yield ev  # type: ignore[misc]
        finally:
            it.close()

    async def work(self, handler: Callable[[Issue, Run], Any], **kwargs: Any) -> int:
        """Client.work with an async handler: the loop runs in a thread and
        each handler call on this event loop."""
        loop = asyncio.get_running_loop()

        def call(issue: Issue, run: _sync.Run) -> Any:
            return asyncio.run_coroutine_threadsafe(handler(issue, Run(run)), loop).result()

        kwargs.setdefault("handle_signals", False)
        return await asyncio.to_thread(self.sync.work, call, **kwargs)
