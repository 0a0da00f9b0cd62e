"""The shared client scenarios, Python side.

Run by the Go test in internal/sdktest against a real `clasp serve`:
``python3 sdk/python/tests/scenarios.py <scenario>`` with CLASP_URL and
CLASP_API_KEY (an agent key) and the scenario's SCN_* variables in the
environment. It prints what it saw as JSON on stdout (one object; the
events scenario one per event), which the Go test checks together with the
server's state. It exits 1 when the client did not behave as the scenario
says (the reason on stderr).
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import clasp  # noqa: E402


def out(obj):
    print(json.dumps(obj), flush=True)


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)


def checkout(c):
    with c.run() as run:
        iss = run.checkout(os.environ["SCN_ISSUE"])
        out({"run": run.id, "identifier": iss.identifier, "status": iss.status,
             "epoch": iss.checkout_epoch, "checkoutRunId": iss.checkout_run_id})


def idempotent(c):
    # A lost answer's retry is the same request with the same key again.
    ref, key = os.environ["SCN_ISSUE"], "scenario-" + os.environ["SCN_NONCE"]
    with c.run() as run:
        first = run.comment(ref, "once", idempotency_key=key)
        again = run.comment(ref, "once", idempotency_key=key)
        out({"run": run.id, "first": first.id, "again": again.id})


def lost_answer(c):
    # The test's proxy loses the first comment's answer: the client retries
    # with the same Idempotency-Key.
    with c.run() as run:
        cm = run.comment(os.environ["SCN_ISSUE"], "lost once")
        out({"run": run.id, "comment": cm.id})


def conflict(c):
    with c.run() as run:
        try:
            run.checkout(os.environ["SCN_ISSUE"])
        except clasp.Conflict as e:
            out({"run": run.id, "status": e.status, "code": e.code, "holderRunId": e.holder_run_id,
                 "holderAgentId": e.holder_agent_id, "reason": e.reason})
            return
        fail("checkout of an issue another live run holds did not raise Conflict")


def claim_until_empty(c):
    got = []
    with c.run() as run:
        while True:
            iss = run.claim(scope="any")
            if iss is None:
                break
            got.append(iss.identifier)
            if len(got) > 50:
                fail("claim never answered None")
        out({"run": run.id, "claimed": got})


def failed_on_exception(c):
    seen = {}
    try:
        with c.run() as run:
            seen["run"] = run.id
            run.checkout(os.environ["SCN_ISSUE"])
            raise RuntimeError("boom in the block")
    except RuntimeError:
        pass
    else:
        fail("the run's block did not raise")

    def handler(issue, run):
        seen["workRun"], seen["workIssue"] = run.id, issue.identifier
        raise RuntimeError("boom in the handler")

    try:
        c.work(handler, idle_wait=0.05)
    except RuntimeError:
        out(seen)
        return
    fail("work did not raise the handler's exception")


def heartbeat(c):
    hold = float(os.environ["SCN_HOLD"])
    seen = {}

    def handler(issue, run):
        if "run" in seen:
            fail(f"the handler was called again ({issue.identifier}): run {seen['run']} lost its lease")
        seen["run"], seen["issue"] = run.id, issue.identifier
        time.sleep(hold)  # the work: longer than the lease
        return "held %.1fs" % hold

    seen["done"] = c.work(handler, idle_wait=0.05)
    out(seen)


def sigterm(c):
    seen = {}

    def handler(issue, run):
        seen["run"], seen["issue"] = run.id, issue.identifier
        out({"started": issue.identifier})  # the test sends SIGTERM now, then creates SCN_RELEASE
        deadline = time.monotonic() + 60
        while not os.path.exists(os.environ["SCN_RELEASE"]) and time.monotonic() < deadline:
            time.sleep(0.02)
        return "finished"

    seen["done"] = c.work(handler, idle_wait=0.05)
    out(seen)


def events(c):
    stop_after = int(os.environ["SCN_STOP_AFTER"])
    last = os.environ.get("SCN_LAST_EVENT_ID")
    n = 0
    for ev in c.events(last_event_id=int(last) if last else None, max_backoff=0.5):
        out({"id": ev.id, "action": ev.action, "entityId": ev.entity_id})
        n += 1
        if n >= stop_after:
            return


def rate_limit(c):
    ref = os.environ["SCN_ISSUE"]
    impatient = clasp.Client(rate_limit_wait=0)
    seen = {}
    for i in range(50):
        try:
            impatient.issue(ref)
        except clasp.RateLimited as e:
            seen.update(refusedAfter=i, status=e.status, code=e.code, retryAfter=e.retry_after)
            break
    else:
        fail("50 reads passed a limit of a few a second")
    start = time.monotonic()
    for _ in range(4):
        c.issue(ref)  # waits out each 429 as its Retry-After says
    seen["patientSeconds"] = time.monotonic() - start
    out(seen)


def aio(c):
    import asyncio

    import clasp.aio

    async def main():
        seen = {}
        async with clasp.aio.Client() as ac:
            async with ac.run() as run:
                iss = await run.checkout(os.environ["SCN_ISSUE"])
                await run.update(iss.id, status="done", comment="async")
                seen["run"] = run.id

            async def handler(issue, run):
                seen["workIssue"] = issue.identifier
                await asyncio.sleep(0.01)
                return "async work"

            seen["done"] = await ac.work(handler, idle_wait=0.05)
        out(seen)

    asyncio.run(main())


SCENARIOS = {f.__name__: f for f in (checkout, idempotent, lost_answer, conflict, claim_until_empty, failed_on_exception,
                                     heartbeat, sigterm, events, rate_limit, aio)}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in SCENARIOS:
        fail("usage: scenarios.py " + "|".join(SCENARIOS))
    SCENARIOS[sys.argv[1]](clasp.Client())
