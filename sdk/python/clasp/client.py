"""The synchronous clasp client (standard library only)."""

import http.client
import json
import os
import random
import secrets
import select
import signal
import ssl
import threading
import time
import urllib.parse
from types import TracebackType
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Type

from .errors import (ClaspError, Conflict, ConnectionFailed, RateLimited, RunNotLive, Unauthorized,
                     error_from_answer)
from .models import Agent, Comment, Event, Issue, RunInfo, from_json

__all__ = ["Client", "Run", "DEFAULT_URL"]

DEFAULT_URL = "http://127.0.0.1:3100"
USER_AGENT = "clasp-python-client/0.1.0"


def _env(*names: str) -> Optional[str]:
    for n in names:
        v = os.environ.get(n)
        if v:
            return v
    return None


def _new_key() -> str:
    return secrets.token_hex(16)


class _Answer:
    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: Dict[str, str], body: Any) -> None:
        self.status, self.headers, self.body = status, headers, body


class Client:
    """A client of one clasp server.

    Arguments default to the environment: ``url`` to CLASP_URL,
    CLASP_API_URL or PAPERCLIP_API_URL (else http://127.0.0.1:3100);
    ``api_key`` to CLASP_API_KEY, CLASP_TOKEN or PAPERCLIP_API_KEY;
    ``run_id`` to CLASP_RUN_ID or PAPERCLIP_RUN_ID (a run the launcher
    opened, such as a server-managed run, whose token is then the key);
    ``ca_cert`` to CLASP_CA_CERT. ``token`` is a run token (clasp_rt_...)
    to act in its run. ``timeout`` bounds each HTTP attempt, in seconds.

    A 429 is waited out as its Retry-After says, for at most
    ``rate_limit_wait`` seconds per call (0: raise RateLimited at once).
    Calls that are safe to repeat (reads, checkout, release, heartbeat,
    and writes sent with an Idempotency-Key) are retried after a
    connection error, ``retries`` times with backoff. A 409 is never
    retried.

    A Client is safe to share between threads (each thread keeps its own
    connection).
    """

    def __init__(
        self,
        url: Optional[str] = None,
        api_key: Optional[str] = None,
        token: Optional[str] = None,
        ca_cert: Optional[str] = None,
        timeout: float = 30.0,
        run_id: Optional[str] = None,
        rate_limit_wait: float = 60.0,
        retries: int = 4,
        user_agent: Optional[str] = None,
    ) -> None:
        base = url or _env("CLASP_URL", "CLASP_API_URL", "PAPERCLIP_API_URL") or DEFAULT_URL
        base = base.split(",")[0].strip()  # a replica list: the first one
        if "://" not in base:
            base = "http://" + base
        base = base.rstrip("/")
        if base.endswith("/api"):
            base = base[: -len("/api")]
        u = urllib.parse.urlsplit(base)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"clasp: {base!r} is not an http(s) URL")
        self.url = base
        self._scheme, self._host, self._port = u.scheme, u.hostname, u.port
        self._prefix = u.path.rstrip("/")
        self.api_key = api_key or _env("CLASP_API_KEY", "CLASP_TOKEN", "PAPERCLIP_API_KEY")
        self.token = token
        self.run_id = run_id or _env("CLASP_RUN_ID", "PAPERCLIP_RUN_ID")
        self.timeout = timeout
        self.rate_limit_wait = rate_limit_wait
        self.retries = retries
        self.user_agent = f"{user_agent} {USER_AGENT}" if user_agent else USER_AGENT
        self._ssl: Optional[ssl.SSLContext] = None
        if self._scheme == "https":
            ctx = ssl.create_default_context()
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ca = ca_cert or _env("CLASP_CA_CERT")
            if ca:
                ctx.load_verify_locations(cafile=ca)
            self._ssl = ctx
        self._local = threading.local()
        self._me: Optional[Agent] = None

    # --- HTTP -------------------------------------------------------------

    def _conn(self, fresh: bool = False) -> Tuple[http.client.HTTPConnection, bool]:
        c = getattr(self._local, "conn", None)
        if c is not None and not fresh:
            sock = c.sock
            # A kept-alive connection the server has closed meanwhile reads
            # as ready (EOF): open a new one rather than send into it.
            if sock is None or not select.select([sock], [], [], 0)[0]:
                return c, sock is not None
        if c is not None:
            c.close()
        if self._ssl is not None:
            c = http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout, context=self._ssl)
        else:
            c = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
        self._local.conn = c
        return c, False

    def _drop_conn(self) -> None:
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
            self._local.conn = None

    def _headers(self, bearer: Optional[str], run_id: Optional[str], has_body: bool,
                 idem_key: Optional[str]) -> Dict[str, str]:
        h = {"Accept": "application/json", "User-Agent": self.user_agent}
        if has_body:
            h["Content-Type"] = "application/json"
        if bearer:
            h["Authorization"] = "Bearer " + bearer
        if run_id:
            h["X-Clasp-Run-Id"] = run_id
        if idem_key:
            h["Idempotency-Key"] = idem_key
        return h

    def _send_once(self, method: str, path: str, body: Optional[bytes],
                   headers: Dict[str, str]) -> _Answer:
        """One HTTP exchange on this thread's connection. A reused
        connection the server had closed (no answer at all) is retried once
        on a fresh one when the call is safe to repeat; the caller decides."""
        conn, reused = self._conn()
        try:
            conn.request(method, self._prefix + path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException) as e:
            self._drop_conn()
            raise ConnectionFailed(f"{method} {path}: no answer from {self.url}: {e}",
                                   code="connection_failed") from e
        hdrs = {k.title(): v for k, v in resp.getheaders()}
        if resp.will_close:
            self._drop_conn()
        parsed: Any = None
        if data:
            try:
                parsed = json.loads(data)
            except ValueError:
                parsed = data.decode("utf-8", "replace")
        return _Answer(resp.status, hdrs, parsed)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        bearer: Optional[str] = None,
        run_id: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        retry_safe: bool = False,
    ) -> _Answer:
        """Sends one API call and returns its 2xx answer, raising a
        ClaspError otherwise. ``retry_safe`` (or an ``idempotency_key``)
        lets it repeat the call after a connection error."""
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = self._headers(bearer if bearer is not None else self.api_key, run_id, data is not None,
                                idempotency_key)
        safe = retry_safe or bool(idempotency_key)
        attempt, waited = 0, 0.0
        while True:
            try:
                a = self._send_once(method, path, data, headers)
            except ConnectionFailed:
                if not safe or attempt >= self.retries:
                    raise
                time.sleep(min(2.0, 0.05 * (2 ** attempt)) * (0.5 + random.random() / 2))
                attempt += 1
                continue
            if 200 <= a.status < 300:
                return a
            if a.status == 409 and a.body and isinstance(a.body, dict) \
                    and a.body.get("code") == "idempotency_in_flight" and attempt < self.retries:
                # The first attempt of this key is still being written: ask again.
                time.sleep(0.05 * (2 ** attempt))
                attempt += 1
                continue
            err = error_from_answer(a.status, a.body, a.headers, f"{method} {path}: HTTP {a.status}")
            if isinstance(err, RateLimited) and waited + err.retry_after <= self.rate_limit_wait:
                # Refused before anything was done: waiting and sending it
                # again is safe for every call.
                time.sleep(err.retry_after)
                waited += err.retry_after
                continue
            raise err

    def _json(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        return self.request(method, path, body, **kw).body

    # --- agent-level calls -----------------------------------------------

    def me(self) -> Agent:
        """The calling agent (GET /api/agents/me)."""
        if self._me is None:
            bearer = self.token or self.api_key
            self._me = from_json(Agent, self._json("GET", "/api/agents/me", bearer=bearer, retry_safe=True))
        return self._me

    def issue(self, ref: str) -> Issue:
        """An issue by UUID or identifier (GET /api/issues/{ref})."""
        return from_json(Issue, self._json("GET", "/api/issues/" + _seg(ref), bearer=self.token or self.api_key,
                                           retry_safe=True))

    def comments(self, ref: str) -> List[Comment]:
        """An issue's comments, oldest first (first 1000)."""
        rows = self._json("GET", f"/api/issues/{_seg(ref)}/comments?order=asc&limit=1000",
                          bearer=self.token or self.api_key, retry_safe=True)
        return [from_json(Comment, r) for r in rows or []]

    def run(self, invocation_source: str = "sdk") -> "Run":
        """A context manager for a run: ``with client.run() as run:`` opens
        one (POST /api/agents/me/runs, with an Idempotency-Key) or, when the
        client was given a run (token=, or CLASP_RUN_ID / a run token from
        the environment), adopts that one. A background thread heartbeats
        it every third of its lease. On leaving, a run it opened is
        finished ``succeeded``, or ``failed`` with the exception's text
        when the block raised (which ends its locks, rule L6); an adopted
        run is left to its launcher."""
        return Run(self, invocation_source)

    def events(self, company_id: Optional[str] = None, last_event_id: Optional[int] = None,
               actions: Optional[Sequence[str]] = None, max_backoff: float = 5.0) -> Iterator[Event]:
        """Follows the company's event stream (Server-Sent Events) and
        yields its activity rows, oldest first. After a dropped connection
        or a restart of the server it reconnects with backoff and resumes
        after the last row it yielded (Last-Event-ID), so no row is skipped
        or repeated. ``last_event_id`` resumes after that id (0 replays the
        whole history; None starts with rows written from now on).
        ``company_id`` defaults to the agent's company. An error answer
        (401, 403, 404) is raised; close the generator to stop."""
        from .events import follow
        if company_id is None:
            company_id = self.me().company_id
        return follow(self, company_id, last_event_id, actions, max_backoff)

    def work(
        self,
        handler: Callable[[Issue, "Run"], Any],
        scope: str = "any",
        expected_statuses: Sequence[str] = ("todo",),
        idle_wait: float = 1.0,
        stop_when_idle: bool = True,
        max_issues: Optional[int] = None,
        handle_signals: bool = True,
    ) -> int:
        """Works issues until none is left: each turn opens a run, claims an
        issue (claim-next, within ``scope``), calls ``handler(issue, run)``
        while the run heartbeats, then writes the handler's return value as
        the result comment and status done in one PATCH (with an
        Idempotency-Key, so a retry after a lost answer writes it once),
        and finishes the run. When the handler raises, the issue is
        released, the run finished failed with the exception's text, and
        the exception raised again. When nothing is free it looks again
        every ``idle_wait`` seconds; with ``stop_when_idle`` it returns
        after two empty looks in a row. The looks of one turn share its
        run. SIGTERM (and SIGINT) stop it
        cleanly: the issue in hand is completed first. Returns how many
        issues it set done."""
        stop = threading.Event()
        restore: List[Tuple[int, Any]] = []
        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                restore.append((sig, signal.signal(sig, lambda *_: stop.set())))
        done, empty = 0, 0
        try:
            while not stop.is_set() and (max_issues is None or done < max_issues):
                lost: Optional[ClaspError] = None
                issue: Optional[Issue] = None
                with self.run(invocation_source="sdk-work") as run:
                    # The looks for work of one turn share its run.
                    while issue is None and lost is None and not stop.is_set():
                        try:
                            issue = run.claim(scope=scope, expected_statuses=expected_statuses)
                        except (RunNotLive, Unauthorized) as e:
                            lost = e  # the run ended under us (a stall past its lease)
                            break
                        if issue is not None:
                            empty = 0
                            break
                        empty += 1
                        if stop_when_idle and empty >= 2:
                            break
                        stop.wait(idle_wait)
                        lost = run.lost
                    if issue is not None:
                        try:
                            result = handler(issue, run)
                        except BaseException:
                            try:
                                run.release(issue.id)
                            except ClaspError:
                                pass  # the run's end releases it anyway (rule L6)
                            raise
                        try:
                            run.update(issue.id, status="done", comment=None if result is None else str(result),
                                       idempotency_key=f"done-{run.id}-{issue.id}")
                            done += 1
                        except (Conflict, RunNotLive, Unauthorized) as e:
                            # The lock was taken over after this run was
                            # swept: the result is not written (rule L6).
                            lost = e
                    if lost is not None:
                        run.finish("failed", error=f"run lost: {lost}")
                if issue is None and lost is None:
                    break  # idle (stop_when_idle) or stopped
        finally:
            for sig, old in restore:
                signal.signal(sig, old)
        return done


def _seg(s: str) -> str:
    return urllib.parse.quote(s, safe="")


class Run:
    """A run of the agent: what checkouts, claims and writes act in.
    Use it as a context manager (Client.run)."""

    def __init__(self, client: Client, invocation_source: str = "sdk") -> None:
        self.client = client
        self._source = invocation_source
        self.id: str = ""
        self.token: Optional[str] = None
        self.agent_id: str = ""
        self.info: Optional[RunInfo] = None
        self.adopted = False
        self.lost: Optional[ClaspError] = None  # set when a heartbeat found the run ended
        self._stop = threading.Event()
        self._hb: Optional[threading.Thread] = None
        self._open_key = _new_key()
        self._finished = False

    # --- lifecycle --------------------------------------------------------

    def __enter__(self) -> "Run":
        c = self.client
        given = c.token or (c.api_key if (c.api_key or "").startswith("clasp_rt_") else None)
        if given or c.run_id:
            self.adopted = True
            self.token = given
            self.id = c.run_id or ""
            if given and not self.id:
                raise ValueError("clasp: a run token needs its run id (run_id=, or CLASP_RUN_ID)")
            self.agent_id = os.environ.get("CLASP_AGENT_ID") or os.environ.get("PAPERCLIP_AGENT_ID") or ""
            self.info = self.heartbeat()
            self.agent_id = self.agent_id or self.info.agent_id
            ttl = self.info.lease_ttl()
        else:
            body = c._json("POST", "/api/agents/me/runs", {"invocationSource": self._source},
                           idempotency_key=self._open_key)
            self.info = from_json(RunInfo, body)
            self.id, self.token, self.agent_id = self.info.id, self.info.run_token, self.info.agent_id
            ttl = self.info.lease_ttl()
        self._hb = threading.Thread(target=self._beat, args=(max(ttl / 3.0, 0.05),),
                                    name=f"clasp-heartbeat-{self.id[:8]}", daemon=True)
        self._hb.start()
        return self

    def __exit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self._stop.set()
        if self._hb is not None:
            self._hb.join()
        if self.adopted or self._finished:
            return
        if ev is None:
            self.finish("succeeded")
        else:
            text = f"{type(ev).__name__}: {ev}" if str(ev) else type(ev).__name__
            self.finish("cancelled" if isinstance(ev, KeyboardInterrupt) else "failed", error=text)

    def _beat(self, every: float) -> None:
        while not self._stop.wait(every):
            try:
                self.heartbeat()
            except (RunNotLive, Unauthorized) as e:
                self.lost = e
                return
            except ClaspError:
                pass  # a passing failure: the next beat tries again

    # --- calls ------------------------------------------------------------

    def _call(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        c = self.client
        if self.token:
            return c._json(method, path, body, bearer=self.token, **kw)
        return c._json(method, path, body, bearer=c.api_key, run_id=self.id, **kw)

    def heartbeat(self) -> RunInfo:
        """Renews the run's lease (POST /api/runs/{id}/heartbeat)."""
        return from_json(RunInfo, self._call("POST", f"/api/runs/{_seg(self.id)}/heartbeat", {}, retry_safe=True))

    def finish(self, status: str = "succeeded", error: Optional[str] = None,
               exit_code: Optional[int] = None) -> Optional[RunInfo]:
        """Ends the run (its locks are released, rule L6). A run that
        already ended is fine (None)."""
        body: Dict[str, Any] = {"status": status}
        if error is not None:
            body["error"] = error[:10000]
        if exit_code is not None:
            body["exitCode"] = exit_code
        self._finished = True
        try:
            return from_json(RunInfo, self._call("POST", f"/api/runs/{_seg(self.id)}/finish", body, retry_safe=True))
        except (RunNotLive, Unauthorized):
            return None

    def _agent(self) -> str:
        if not self.agent_id:
            self.agent_id = self.client.me().id
        return self.agent_id

    def checkout(self, ref: str, expected_statuses: Sequence[str] = ("todo",)) -> Issue:
        """Takes the issue's lock for this run (rule L1) and returns it with
        its new checkout_epoch. Raises Conflict (holder_run_id,
        holder_agent_id, reason) when another live run holds it. Repeating
        it is safe (the same run again changes nothing, rule L2)."""
        body = {"agentId": self._agent(), "expectedStatuses": list(expected_statuses)}
        return from_json(Issue, self._call("POST", f"/api/issues/{_seg(ref)}/checkout", body, retry_safe=True))

    def claim(self, scope: str = "any", expected_statuses: Optional[Sequence[str]] = None) -> Optional[Issue]:
        """Checks out the most urgent free issue in one call (claim-next);
        None when nothing is free. Not repeated after a lost answer (the
        issue it took stays held by this run until the run ends)."""
        body: Dict[str, Any] = {"scope": scope}
        if expected_statuses is not None:
            body["expectedStatuses"] = list(expected_statuses)
        got = self._call("POST", "/api/agents/me/claim", body)
        return None if not got else from_json(Issue, got)

    def comment(self, ref: str, body: str, idempotency_key: Optional[str] = None) -> Comment:
        """Adds a comment (sent with an Idempotency-Key: a retry after a
        lost answer writes it once)."""
        return from_json(Comment, self._call("POST", f"/api/issues/{_seg(ref)}/comments", {"body": body},
                                             idempotency_key=idempotency_key or _new_key()))

    def update(self, ref: str, status: Optional[str] = None, comment: Optional[str] = None,
               idempotency_key: Optional[str] = None, **fields: Any) -> Issue:
        """PATCHes the issue (rule L5: only the holder while it is locked);
        ``comment`` is written in the same transaction. Other fields
        (title, description, priority, assignee_agent_id) by keyword."""
        body: Dict[str, Any] = {}
        for k, v in fields.items():
            body["".join(w.capitalize() if i else w for i, w in enumerate(k.split("_")))] = v
        if status is not None:
            body["status"] = status
        if comment is not None:
            body["comment"] = comment
        return from_json(Issue, self._call("PATCH", f"/api/issues/{_seg(ref)}", body,
                                           idempotency_key=idempotency_key or _new_key()))

    def release(self, ref: str, unassign: bool = False) -> Issue:
        """Releases the issue's lock (rule L4): in_progress becomes todo."""
        body = {"unassign": True} if unassign else {}
        return from_json(Issue, self._call("POST", f"/api/issues/{_seg(ref)}/release", body, retry_safe=True))

