/**
 * TypeScript client of the clasp coordination server, for Node 18+ and
 * browsers: `fetch` only, no runtime dependency. The API's types are
 * generated from the server's OpenAPI document (src/generated/openapi.ts).
 *
 *     const client = new Client();                 // CLASP_URL, CLASP_API_KEY, ... in Node
 *     await client.withRun(async (run) => {
 *       const issue = await run.claim();            // null when nothing is free
 *       if (issue) await run.update(issue.id, { status: "done", comment: "fixed" });
 *     });
 */
import type * as api from "./generated/openapi.js";
import {
  ClaspError,
  ConflictError,
  ConnectionFailedError,
  RateLimitedError,
  RunNotLiveError,
  UnauthorizedError,
  errorFromAnswer,
} from "./errors.js";

export * from "./errors.js";
export type * as api from "./generated/openapi.js";

/** An issue as the server answers it; fields a newer server adds are kept. */
export type Issue = api.Issue & {
  blockedBy?: unknown[];
  dependencyReady?: boolean | null;
  workspace?: Record<string, unknown> | null;
  [extra: string]: unknown;
};
export type RunInfo = api.Run & { [extra: string]: unknown };
export type Comment = api.Comment & { [extra: string]: unknown };
export type Agent = api.Agent & { [extra: string]: unknown };
export type Event = api.Activity & { [extra: string]: unknown };
export type IssueStatus = api.IssueStatus;

export const DEFAULT_URL = "http://127.0.0.1:3100";
const USER_AGENT = "clasp-typescript-client/0.1.0";

export interface ClientOptions {
  /** Server root; default CLASP_URL, CLASP_API_URL or PAPERCLIP_API_URL (Node), else http://127.0.0.1:3100. */
  url?: string;
  /** Agent API key; default CLASP_API_KEY, CLASP_TOKEN or PAPERCLIP_API_KEY (Node). */
  apiKey?: string;
  /** A run token (clasp_rt_...): act in that run (withRun adopts it). */
  token?: string;
  /** A run the launcher opened; default CLASP_RUN_ID or PAPERCLIP_RUN_ID (Node). */
  runId?: string;
  /** Bound of each HTTP attempt, in ms (default 30 000). */
  timeoutMs?: number;
  /** How long one call may wait out 429 answers as their Retry-After says (default 60 000 ms; 0: throw at once). */
  rateLimitWaitMs?: number;
  /** Retries after a connection error of calls safe to repeat (default 4). */
  retries?: number;
  /** The fetch to use (default globalThis.fetch). */
  fetch?: typeof fetch;
}

export interface CallOptions {
  signal?: AbortSignal;
}

interface RequestOptions extends CallOptions {
  bearer?: string | null;
  runId?: string | null;
  idempotencyKey?: string;
  /** The call may be repeated after a connection error. */
  retrySafe?: boolean;
}

function env(...names: string[]): string | undefined {
  const e = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  for (const n of names) if (e?.[n]) return e[n];
  return undefined;
}

/** A random key (32 hex digits). */
export function newIdempotencyKey(): string {
  const b = new Uint8Array(16);
  const c = (globalThis as { crypto?: { getRandomValues?: (a: Uint8Array) => Uint8Array } }).crypto;
  if (c?.getRandomValues) c.getRandomValues(b);
  else for (let i = 0; i < b.length; i++) b[i] = Math.floor(Math.random() * 256);
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** A signal that aborts when parent does or after ms. */
function withTimeout(parent: AbortSignal | undefined, ms: number): { signal: AbortSignal; done: () => void } {
  const ac = new AbortController();
  const onAbort = () => ac.abort(parent!.reason);
  if (parent?.aborted) ac.abort(parent.reason);
  else parent?.addEventListener("abort", onAbort, { once: true });
  const t = ms > 0 ? setTimeout(() => ac.abort(new ClaspError(`no answer within ${ms} ms`, { code: "timeout" })), ms) : undefined;
  return {
    signal: ac.signal,
    done: () => {
      if (t) clearTimeout(t);
      parent?.removeEventListener("abort", onAbort);
    },
  };
}

const seg = encodeURIComponent;

function leaseTtlMs(r: RunInfo): number {
  const end = r.leaseExpiresAt ? Date.parse(r.leaseExpiresAt) : NaN;
  const from = Date.parse((r.lastSignOfLifeAt ?? r.startedAt) as string);
  return end > from ? end - from : 60_000;
}

/** A client of one clasp server. */
export class Client {
  readonly url: string;
  readonly apiKey: string | undefined;
  readonly token: string | undefined;
  readonly runId: string | undefined;
  readonly timeoutMs: number;
  readonly rateLimitWaitMs: number;
  readonly retries: number;
  private readonly fetchFn: typeof fetch;
  private me_: Agent | undefined;

  constructor(opts: ClientOptions = {}) {
    let base = (opts.url ?? env("CLASP_URL", "CLASP_API_URL", "PAPERCLIP_API_URL") ?? DEFAULT_URL).split(",")[0].trim();
    if (!base.includes("://")) base = "http://" + base;
    base = base.replace(/\/+$/, "").replace(/\/api$/, "");
    this.url = base;
    this.apiKey = opts.apiKey ?? env("CLASP_API_KEY", "CLASP_TOKEN", "PAPERCLIP_API_KEY");
    this.token = opts.token;
    this.runId = opts.runId ?? env("CLASP_RUN_ID", "PAPERCLIP_RUN_ID");
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.rateLimitWaitMs = opts.rateLimitWaitMs ?? 60_000;
    this.retries = opts.retries ?? 4;
    const f = opts.fetch ?? globalThis.fetch;
    if (!f) throw new Error("clasp: no fetch in this environment; pass one in ClientOptions.fetch");
    this.fetchFn = f.bind(globalThis);
  }

  /**
   * Sends one API call and answers its 2xx body (null for 204), throwing a
   * ClaspError otherwise. A 429 is waited out (rateLimitWaitMs); a
   * connection error is retried only when the call is safe to repeat
   * (retrySafe, or an idempotency key). A 409 is never retried.
   */
  async request<T>(method: string, path: string, body?: unknown, o: RequestOptions = {}): Promise<T> {
    const headers: Record<string, string> = { Accept: "application/json" };
    if (typeof window === "undefined") headers["User-Agent"] = USER_AGENT;
    const bearer = o.bearer === undefined ? this.apiKey : o.bearer;
    if (bearer) headers.Authorization = "Bearer " + bearer;
    if (o.runId) headers["X-Clasp-Run-Id"] = o.runId;
    if (o.idempotencyKey) headers["Idempotency-Key"] = o.idempotencyKey;
    const data = body === undefined ? undefined : JSON.stringify(body);
    if (data !== undefined) headers["Content-Type"] = "application/json";
    const safe = o.retrySafe || !!o.idempotencyKey;
    let attempt = 0;
    let waited = 0;
    for (;;) {
      const t = withTimeout(o.signal, this.timeoutMs);
      let res: Response;
      let text: string;
      try {
        res = await this.fetchFn(this.url + path, { method, headers, body: data, signal: t.signal });
        text = await res.text();
      } catch (e) {
        t.done();
        if (o.signal?.aborted) throw o.signal.reason;
        if (!safe || attempt >= this.retries) {
          throw new ConnectionFailedError(`${method} ${path}: no answer from ${this.url}: ${(e as Error).message}`, { code: "connection_failed", cause: e });
        }
        await sleep(Math.min(2000, 50 * 2 ** attempt) * (0.5 + Math.random() / 2), o.signal);
        attempt++;
        continue;
      }
      t.done();
      let parsed: unknown = null;
      if (text) {
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = text;
        }
      }
      if (res.ok) return parsed as T;
      if (res.status === 409 && (parsed as { code?: string } | null)?.code === "idempotency_in_flight" && attempt < this.retries) {
        await sleep(50 * 2 ** attempt, o.signal);
        attempt++;
        continue;
      }
      const err = errorFromAnswer(res.status, parsed, res.headers, `${method} ${path}: HTTP ${res.status}`);
      if (err instanceof RateLimitedError && waited + err.retryAfter * 1000 <= this.rateLimitWaitMs) {
        // Refused before anything was done: sending it again is safe.
        await sleep(err.retryAfter * 1000, o.signal);
        waited += err.retryAfter * 1000;
        continue;
      }
      throw err;
    }
  }

  /** The calling agent (GET /api/agents/me). */
  async me(o: CallOptions = {}): Promise<Agent> {
    this.me_ ??= await this.request<Agent>("GET", "/api/agents/me", undefined, { ...o, bearer: this.token ?? this.apiKey, retrySafe: true });
    return this.me_;
  }

  /** An issue by UUID or identifier. */
  issue(ref: string, o: CallOptions = {}): Promise<Issue> {
    return this.request<Issue>("GET", `/api/issues/${seg(ref)}`, undefined, { ...o, bearer: this.token ?? this.apiKey, retrySafe: true });
  }

  /** An issue's comments, oldest first (the first 1000). */
  comments(ref: string, o: CallOptions = {}): Promise<Comment[]> {
    return this.request<Comment[]>("GET", `/api/issues/${seg(ref)}/comments?order=asc&limit=1000`, undefined, { ...o, bearer: this.token ?? this.apiKey, retrySafe: true });
  }

  /** Opens a run (or adopts the launcher's: token, or CLASP_RUN_ID) and starts its heartbeat; end it with Run.close. withRun does both. */
  async openRun(o: CallOptions & { invocationSource?: string } = {}): Promise<Run> {
    const given = this.token ?? (this.apiKey?.startsWith("clasp_rt_") ? this.apiKey : undefined);
    let run: Run;
    if (given || this.runId) {
      if (!this.runId) throw new Error("clasp: a run token needs its run id (runId, or CLASP_RUN_ID)");
      run = new Run(this, this.runId, given, env("CLASP_AGENT_ID", "PAPERCLIP_AGENT_ID") ?? "", true);
      run.info = await run.heartbeat(o);
      run.agentId ||= run.info.agentId;
    } else {
      const info = await this.request<RunInfo>("POST", "/api/agents/me/runs", { invocationSource: o.invocationSource ?? "sdk" }, { ...o, idempotencyKey: newIdempotencyKey() });
      run = new Run(this, info.id, info.runToken, info.agentId, false);
      run.info = info;
    }
    run.startHeartbeat(Math.max(leaseTtlMs(run.info!) / 3, 50));
    return run;
  }

  /**
   * Runs fn in a run: opens one (or adopts the launcher's), heartbeats it
   * every third of its lease, and finishes it `succeeded` when fn resolves
   * or `failed` with the error's text when it throws (the error is thrown
   * again); an adopted run is left to its launcher.
   */
  async withRun<T>(fn: (run: Run) => Promise<T>, o: CallOptions & { invocationSource?: string } = {}): Promise<T> {
    const run = await this.openRun(o);
    let result: T;
    try {
      result = await fn(run);
    } catch (e) {
      await run.close(e);
      throw e;
    }
    await run.close();
    return result;
  }

  /**
   * Follows the company's event stream (Server-Sent Events), oldest first.
   * After a dropped connection or a server restart it reconnects with
   * backoff and resumes after the last row it yielded (Last-Event-ID), so
   * no row is skipped or repeated. lastEventId resumes after that id (0
   * replays the history; absent: rows from now on). companyId defaults to
   * the agent's company. Error answers (401, 403, 404) are thrown; break
   * out of the loop or abort the signal to stop.
   */
  async *events(o: { companyId?: string; lastEventId?: number; actions?: string[]; maxBackoffMs?: number; signal?: AbortSignal } = {}): AsyncGenerator<Event> {
    const companyId = o.companyId ?? (await this.me({ signal: o.signal })).companyId;
    let after = o.lastEventId;
    let backoff = 100;
    const maxBackoff = o.maxBackoffMs ?? 5000;
    let path = `/api/companies/${seg(companyId)}/events`;
    if (o.actions?.length) path += "?action=" + o.actions.map(seg).join(",");
    const bearer = this.token ?? this.apiKey;
    for (;;) {
      const headers: Record<string, string> = { Accept: "text/event-stream" };
      if (bearer) headers.Authorization = "Bearer " + bearer;
      if (this.runId && !this.token) headers["X-Clasp-Run-Id"] = this.runId;
      if (after !== undefined) headers["Last-Event-ID"] = String(after);
      const ac = new AbortController();
      const onAbort = () => ac.abort(o.signal!.reason);
      o.signal?.addEventListener("abort", onAbort, { once: true });
      let delivered = false;
      try {
        let res: Response | undefined;
        try {
          res = await this.fetchFn(this.url + path, { headers, signal: ac.signal });
        } catch (e) {
          if (o.signal?.aborted) return;
        }
        if (res && res.status !== 200) {
          const text = await res.text();
          let parsed: unknown = null;
          try { parsed = JSON.parse(text); } catch { /* not JSON */ }
          const err = errorFromAnswer(res.status, parsed, res.headers, `GET ${path}: HTTP ${res.status}`);
          if (!(res.status === 429 || res.status >= 500)) throw err;
          await sleep(err instanceof RateLimitedError ? err.retryAfter * 1000 : backoff, o.signal);
          continue;
        }
        if (res?.body) {
          const reader = res.body.getReader();
          const dec = new TextDecoder();
          let buf = "";
          let data: string[] = [];
          try {
            for (;;) {
              const { value, done } = await reader.read();
              if (done) break;
              buf += dec.decode(value, { stream: true });
              let nl: number;
              while ((nl = buf.indexOf("\n")) >= 0) {
                const line = buf.slice(0, nl).replace(/\r$/, "");
                buf = buf.slice(nl + 1);
                if (line.startsWith("data:")) data.push(line.slice(line[5] === " " ? 6 : 5));
                else if (line.startsWith(": clasp events for company ") && after === undefined) {
                  // Where the stream starts: a reconnect before any row resumes there.
                  const m = / after (\d+)$/.exec(line);
                  if (m) after = Number(m[1]);
                } else if (line === "" && data.length) {
                  const ev = JSON.parse(data.join("\n")) as Event;
                  data = [];
                  after = ev.id;
                  delivered = true;
                  yield ev;
                }
              }
            }
          } catch {
            if (o.signal?.aborted) return;
            // A broken stream: reconnect below.
          } finally {
            reader.releaseLock?.();
          }
        }
      } finally {
        o.signal?.removeEventListener("abort", onAbort);
        ac.abort();
      }
      if (o.signal?.aborted) return;
      if (delivered) backoff = 100;
      await sleep(backoff * (0.5 + Math.random()), o.signal).catch(() => undefined);
      if (o.signal?.aborted) return;
      backoff = Math.min(backoff * 2, maxBackoff);
    }
  }

  /**
   * Works issues until none is left: each turn opens a run, claims an issue
   * (within scope), calls handler(issue, run) while the run heartbeats,
   * then writes the handler's result as the result comment with status
   * done in one PATCH (with an Idempotency-Key, so a retry after a lost
   * answer writes it once) and finishes the run. When the handler throws,
   * the issue is released, the run finished failed with the error's text,
   * and the error thrown again. When nothing is free it looks again every
   * idleWaitMs; with stopWhenIdle (default) it returns after two empty
   * looks in a row. The looks of one turn share its run. SIGTERM and SIGINT (Node), or the signal, stop it
   * cleanly: the issue in hand is completed first. Answers how many issues
   * it set done.
   */
  async work(
    handler: (issue: Issue, run: Run) => unknown | Promise<unknown>,
    o: { scope?: "mine" | "unassigned" | "any"; expectedStatuses?: IssueStatus[]; idleWaitMs?: number; stopWhenIdle?: boolean; maxIssues?: number; signal?: AbortSignal; handleSignals?: boolean } = {},
  ): Promise<number> {
    const stop = new AbortController();
    const onStop = () => stop.abort();
    o.signal?.addEventListener("abort", onStop, { once: true });
    const proc = (globalThis as { process?: { once?: Function; removeListener?: Function } }).process;
    const handle = (o.handleSignals ?? true) && typeof proc?.once === "function";
    if (handle) for (const s of ["SIGTERM", "SIGINT"]) proc!.once!(s, onStop);
    let done = 0;
    let empty = 0;
    try {
      while (!stop.signal.aborted && (o.maxIssues === undefined || done < o.maxIssues)) {
        const run = await this.openRun({ invocationSource: "sdk-work" });
        let issue: Issue | null = null;
        let lost: unknown;
        try {
          // The looks for work of one turn share its run.
          while (!issue && !lost && !stop.signal.aborted) {
            try {
              issue = await run.claim({ scope: o.scope ?? "any", expectedStatuses: o.expectedStatuses ?? ["todo"] });
            } catch (e) {
              if (!(e instanceof RunNotLiveError || e instanceof UnauthorizedError)) throw e;
              lost = e; // the run ended under us (a stall past its lease)
              break;
            }
            if (issue) {
              empty = 0;
              break;
            }
            if (++empty >= 2 && (o.stopWhenIdle ?? true)) break;
            await sleep(o.idleWaitMs ?? 1000, stop.signal).catch(() => undefined);
            lost = run.lost;
          }
          if (issue) {
            let result: unknown;
            try {
              result = await handler(issue, run);
            } catch (e) {
              await run.release(issue.id).catch(() => undefined); // the run's end releases it anyway (rule L6)
              throw e;
            }
            try {
              await run.update(issue.id, { status: "done", comment: result == null ? undefined : String(result) }, { idempotencyKey: `done-${run.id}-${issue.id}` });
              done++;
            } catch (e) {
              if (!(e instanceof ConflictError || e instanceof RunNotLiveError || e instanceof UnauthorizedError)) throw e;
              lost = e; // the lock was taken over after this run was swept (rule L6)
            }
          }
        } catch (e) {
          await run.close(e);
          throw e;
        }
        if (lost) await run.finish("failed", { error: `run lost: ${(lost as Error).message}` });
        await run.close();
        if (!issue && !lost) break; // idle (stopWhenIdle) or stopped
      }
    } finally {
      o.signal?.removeEventListener("abort", onStop);
      if (handle) for (const s of ["SIGTERM", "SIGINT"]) proc!.removeListener!(s, onStop);
    }
    return done;
  }
}

/** A run of the agent: what checkouts, claims and writes act in. */
export class Run {
  info: RunInfo | undefined;
  /** Set when a heartbeat found the run ended (lost or finished elsewhere). */
  lost: ClaspError | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  private finished = false;

  constructor(
    readonly client: Client,
    readonly id: string,
    readonly token: string | undefined,
    public agentId: string,
    readonly adopted: boolean,
  ) {}

  /** @internal */
  startHeartbeat(everyMs: number): void {
    let busy = false;
    this.timer = setInterval(async () => {
      if (busy) return;
      busy = true;
      try {
        await this.heartbeat();
      } catch (e) {
        if (e instanceof RunNotLiveError || e instanceof UnauthorizedError) {
          this.lost = e;
          this.stopHeartbeat();
        }
      } finally {
        busy = false;
      }
    }, everyMs);
    // The heartbeat alone never keeps a Node process alive.
    (this.timer as { unref?: () => void }).unref?.();
  }

  private stopHeartbeat(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Stops the heartbeat and, for a run it opened, finishes it: succeeded without error, failed with its text. */
  async close(error?: unknown): Promise<void> {
    this.stopHeartbeat();
    if (this.adopted || this.finished) return;
    if (error === undefined) await this.finish("succeeded");
    else await this.finish("failed", { error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) });
  }

  private call<T>(method: string, path: string, body: unknown, o: RequestOptions = {}): Promise<T> {
    if (this.token) return this.client.request<T>(method, path, body, { ...o, bearer: this.token });
    return this.client.request<T>(method, path, body, { ...o, runId: this.id });
  }

  /** Renews the run's lease. */
  heartbeat(o: CallOptions = {}): Promise<RunInfo> {
    return this.call<RunInfo>("POST", `/api/runs/${seg(this.id)}/heartbeat`, {}, { ...o, retrySafe: true });
  }

  /** Ends the run (its locks are released, rule L6); a run that already ended answers null. */
  async finish(status: "succeeded" | "failed" | "cancelled" | "timed_out", o: CallOptions & { error?: string; exitCode?: number } = {}): Promise<RunInfo | null> {
    const body: Record<string, unknown> = { status };
    if (o.error !== undefined) body.error = o.error.slice(0, 10_000);
    if (o.exitCode !== undefined) body.exitCode = o.exitCode;
    this.finished = true;
    this.stopHeartbeat();
    try {
      return await this.call<RunInfo>("POST", `/api/runs/${seg(this.id)}/finish`, body, { signal: o.signal, retrySafe: true });
    } catch (e) {
      if (e instanceof RunNotLiveError || e instanceof UnauthorizedError) return null;
      throw e;
    }
  }

  private async agent(o: CallOptions): Promise<string> {
    this.agentId ||= (await this.client.me(o)).id;
    return this.agentId;
  }

  /** Takes the issue's lock for this run (rule L1); ConflictError names the holder. Safe to repeat (rule L2). */
  async checkout(ref: string, o: CallOptions & { expectedStatuses?: IssueStatus[] } = {}): Promise<Issue> {
    const body = { agentId: await this.agent(o), expectedStatuses: o.expectedStatuses ?? ["todo"] };
    return this.call<Issue>("POST", `/api/issues/${seg(ref)}/checkout`, body, { signal: o.signal, retrySafe: true });
  }

  /** Checks out the most urgent free issue (claim-next); null when nothing is free. Not repeated after a lost answer. */
  async claim(o: CallOptions & { scope?: "mine" | "unassigned" | "any"; expectedStatuses?: IssueStatus[] } = {}): Promise<Issue | null> {
    const body: Record<string, unknown> = { scope: o.scope ?? "any" };
    if (o.expectedStatuses) body.expectedStatuses = o.expectedStatuses;
    return (await this.call<Issue | null>("POST", "/api/agents/me/claim", body, { signal: o.signal })) || null;
  }

  /** Adds a comment, sent with an Idempotency-Key (a retry after a lost answer writes it once). */
  comment(ref: string, body: string, o: CallOptions & { idempotencyKey?: string } = {}): Promise<Comment> {
    return this.call<Comment>("POST", `/api/issues/${seg(ref)}/comments`, { body }, { signal: o.signal, idempotencyKey: o.idempotencyKey ?? newIdempotencyKey() });
  }

  /** PATCHes the issue (rule L5); comment is written in the same transaction. */
  update(ref: string, fields: api.IssueUpdate, o: CallOptions & { idempotencyKey?: string } = {}): Promise<Issue> {
    const body = Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined));
    return this.call<Issue>("PATCH", `/api/issues/${seg(ref)}`, body, { signal: o.signal, idempotencyKey: o.idempotencyKey ?? newIdempotencyKey() });
  }

  /** Releases the issue's lock (rule L4): in_progress becomes todo. */
  release(ref: string, o: CallOptions & { unassign?: boolean } = {}): Promise<Issue> {
    return this.call<Issue>("POST", `/api/issues/${seg(ref)}/release`, o.unassign ? { unassign: true } : {}, { signal: o.signal, retrySafe: true });
  }
}
