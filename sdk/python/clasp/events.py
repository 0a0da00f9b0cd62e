"""Following the event stream (Server-Sent Events) with resumption."""

import http.client
import json
import random
import time
import urllib.parse
from typing import TYPE_CHECKING, Dict, Iterator, Optional, Sequence

from .errors import error_from_answer
from .models import Event, from_json

if TYPE_CHECKING:
    from .client import Client


def follow(c: "Client", company_id: str, last_event_id: Optional[int],
           actions: Optional[Sequence[str]], max_backoff: float) -> Iterator[Event]:
    """Yields the company's activity rows; see Client.events."""
    after = last_event_id
    backoff = 0.1
    path = f"{c._prefix}/api/companies/{urllib.parse.quote(company_id, safe='')}/events"
    if actions:
        path += "?action=" + urllib.parse.quote(",".join(actions), safe=",")
    bearer = c.token or c.api_key
    while True:
        headers: Dict[str, str] = {"Accept": "text/event-stream", "User-Agent": c.user_agent}
        if bearer:
            headers["Authorization"] = "Bearer " + bearer
        if c.run_id and not c.token:
            headers["X-Clasp-Run-Id"] = c.run_id
        if after is not None:
            headers["Last-Event-ID"] = str(after)
        # The server writes a comment line every 15 s: a read that waits
        # longer than 45 s means the connection is gone.
        if c._ssl is not None:
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(c._host, c._port, timeout=45,
                                                                           context=c._ssl)
        else:
            conn = http.client.HTTPConnection(c._host, c._port, timeout=45)
        delivered = False
        try:
            try:
                conn.request("GET", path, headers=headers)
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException):
                resp = None
            if resp is not None and resp.status != 200:
                body = resp.read()
                try:
                    parsed = json.loads(body)
                except ValueError:
                    parsed = None
                err = error_from_answer(resp.status, parsed, {k.title(): v for k, v in resp.getheaders()},
                                        f"GET {path}: HTTP {resp.status}")
                if resp.status == 429 or resp.status >= 500:
                    time.sleep(getattr(err, "retry_after", backoff))
                    continue
                raise err
            if resp is not None:
                data, ev_id = [], None  # type: list, Optional[str]
                try:
                    while True:
                        raw = resp.readline()
                        if not raw:
                            break
                        line = raw.decode("utf-8").rstrip("\r\n")
                        if line.startswith("data:"):
                            data.append(line[5:].lstrip(" ") if line[5:6] == " " else line[5:])
                        elif line.startswith(": clasp events for company ") and after is None:
                            # The stream says where it starts: a reconnect
                            # before any row resumes from there.
                            tail = line.rsplit(" after ", 1)[-1]
                            after = int(tail) if tail.isdigit() else None
                        elif line.startswith("id:"):
                            ev_id = line[3:].strip()
                        elif line == "" and data:
                            ev = from_json(Event, json.loads("\n".join(data)))
                            data = []
                            after = ev.id or (int(ev_id) if ev_id else after)
                            delivered = True
                            yield ev
                except (OSError, http.client.HTTPException, ValueError):
                    pass  # a broken stream: reconnect below
        finally:
            conn.close()
        if delivered:
            backoff = 0.1
        time.sleep(backoff * (0.5 + random.random()))
        backoff = min(backoff * 2, max_backoff)

