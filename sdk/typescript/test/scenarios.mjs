// The shared client scenarios, TypeScript side (the built package, dist/).
//
// Run by the Go test in internal/sdktest against a real `clasp serve`:
// `node sdk/typescript/test/scenarios.mjs <scenario>` with CLASP_URL and
// CLASP_API_KEY (an agent key) and the scenario's SCN_* variables in the
// environment. It prints what it saw as JSON on stdout (one object; the
// events scenario one per event), which the Go test checks together with
// the server's state. It exits 1 when the client did not behave as the
// scenario says (the reason on stderr).
import { existsSync } from "node:fs";
import { Client, ConflictError, RateLimitedError } from "../dist/index.js";

const env = process.env;
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");
function fail(msg) {
  process.stderr.write(msg + "\n");
  process.exit(1);
}

const scenarios = {
  async checkout(c) {
    await c.withRun(async (run) => {
      const iss = await run.checkout(env.SCN_ISSUE);
      out({ run: run.id, identifier: iss.identifier, status: iss.status, epoch: iss.checkoutEpoch, checkoutRunId: iss.checkoutRunId });
    });
  },

  async idempotent(c) {
    // A lost answer's retry is the same request with the same key again.
    const key = "scenario-" + env.SCN_NONCE;
    await c.withRun(async (run) => {
      const first = await run.comment(env.SCN_ISSUE, "once", { idempotencyKey: key });
      const again = await run.comment(env.SCN_ISSUE, "once", { idempotencyKey: key });
      out({ run: run.id, first: first.id, again: again.id });
    });
  },

  async lost_answer(c) {
    // The test's proxy loses the first comment's answer: the client retries
    // with the same Idempotency-Key.
    await c.withRun(async (run) => {
      const cm = await run.comment(env.SCN_ISSUE, "lost once");
      out({ run: run.id, comment: cm.id });
    });
  },

  async conflict(c) {
    await c.withRun(async (run) => {
      try {
        await run.checkout(env.SCN_ISSUE);
      } catch (e) {
        if (!(e instanceof ConflictError)) throw e;
        out({ run: run.id, status: e.status, code: e.code, holderRunId: e.holderRunId, holderAgentId: e.holderAgentId, reason: e.reason });
        return;
      }
      fail("checkout of an issue another live run holds did not throw ConflictError");
    });
  },

  async claim_until_empty(c) {
    const claimed = [];
    await c.withRun(async (run) => {
      for (;;) {
        const iss = await run.claim({ scope: "any" });
        if (!iss) break;
        claimed.push(iss.identifier);
        if (claimed.length > 50) fail("claim never answered null");
      }
      out({ run: run.id, claimed });
    });
  },

  async failed_on_exception(c) {
    const seen = {};
    try {
      await c.withRun(async (run) => {
        seen.run = run.id;
        await run.checkout(env.SCN_ISSUE);
        throw new Error("boom in the block");
      });
      fail("withRun did not throw");
    } catch (e) {
      if (e.message !== "boom in the block") throw e;
    }
    try {
      await c.work(async (issue, run) => {
        seen.workRun = run.id;
        seen.workIssue = issue.identifier;
        throw new Error("boom in the handler");
      }, { idleWaitMs: 50 });
    } catch (e) {
      if (e.message !== "boom in the handler") throw e;
      out(seen);
      return;
    }
    fail("work did not throw the handler's error");
  },

  async heartbeat(c) {
    const hold = Number(env.SCN_HOLD);
    const seen = {};
    seen.done = await c.work(async (issue, run) => {
      if (seen.run) fail(`the handler was called again (${issue.identifier}): run ${seen.run} lost its lease`);
      seen.run = run.id;
      seen.issue = issue.identifier;
      await new Promise((r) => setTimeout(r, hold * 1000)); // the work: longer than the lease
      return `held ${hold.toFixed(1)}s`;
    }, { idleWaitMs: 50 });
    out(seen);
  },

  async sigterm(c) {
    const seen = {};
    seen.done = await c.work(async (issue, run) => {
      seen.run = run.id;
      seen.issue = issue.identifier;
      out({ started: issue.identifier }); // the test sends SIGTERM now, then creates SCN_RELEASE
      const deadline = Date.now() + 60_000;
      while (!existsSync(env.SCN_RELEASE) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      return "finished";
    }, { idleWaitMs: 50 });
    out(seen);
  },

  async events(c) {
    const stopAfter = Number(env.SCN_STOP_AFTER);
    const last = env.SCN_LAST_EVENT_ID;
    let n = 0;
    for await (const ev of c.events({ lastEventId: last ? Number(last) : undefined, maxBackoffMs: 500 })) {
      out({ id: ev.id, action: ev.action, entityId: ev.entityId });
      if (++n >= stopAfter) return;
    }
  },

  async rate_limit(c) {
    const impatient = new Client({ rateLimitWaitMs: 0 });
    const seen = {};
    let refused = false;
    for (let i = 0; i < 50 && !refused; i++) {
      try {
        await impatient.issue(env.SCN_ISSUE);
      } catch (e) {
        if (!(e instanceof RateLimitedError)) throw e;
        Object.assign(seen, { refusedAfter: i, status: e.status, code: e.code, retryAfter: e.retryAfter });
        refused = true;
      }
    }
    if (!refused) fail("50 reads passed a limit of a few a second");
    const start = performance.now();
    for (let i = 0; i < 4; i++) await c.issue(env.SCN_ISSUE); // waits out each 429 as its Retry-After says
    seen.patientSeconds = (performance.now() - start) / 1000;
    out(seen);
  },
};

const name = process.argv[2];
if (!scenarios[name]) fail("usage: scenarios.mjs " + Object.keys(scenarios).join("|"));
await scenarios[name](new Client());
