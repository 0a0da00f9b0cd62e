/**
 * Errors of the clasp client. Every answer outside 2xx is a ClaspError (or
 * a subclass) with the HTTP status, the server's stable `code`, its
 * `details` and the request id (RULES.md, Errors and requests); a request
 * that got no HTTP answer is a ConnectionFailedError.
 */

export class ClaspError extends Error {
  readonly status: number | null;
  readonly code: string;
  readonly details: Record<string, unknown>;
  readonly requestId: string | null;

  constructor(message: string, opts: { status?: number | null; code?: string; details?: Record<string, unknown>; requestId?: string | null; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.status = opts.status ?? null;
    this.code = opts.code ?? "";
    this.details = opts.details ?? {};
    this.requestId = opts.requestId ?? null;
  }
}

/**
 * A 409 other than run_not_live: the issue is held by another run
 * (checkout_conflict), written by another holder (ownership_conflict), ...
 * A 409 is never retried.
 */
export class ConflictError extends ClaspError {
  /** The run holding the issue. */
  get holderRunId(): string | null {
    return (this.details.checkoutRunId as string | null | undefined) ?? (this.details.executionRunId as string | null | undefined) ?? null;
  }
  /** The agent the issue is assigned to. */
  get holderAgentId(): string | null {
    return (this.details.assigneeAgentId as string | null | undefined) ?? null;
  }
  /** held_by_live_run, assigned_to_other_agent or status_not_expected. */
  get reason(): string | null {
    return (this.details.reason as string | undefined) ?? null;
  }
}

/** 409 run_not_live: the run has ended or was lost; it holds nothing. */
export class RunNotLiveError extends ClaspError {}

/** 401: a missing, wrong or revoked credential, or a run token whose run ended. */
export class UnauthorizedError extends ClaspError {}

/** 429 rate_limited; `retryAfter` is the server's Retry-After in seconds. */
export class RateLimitedError extends ClaspError {
  readonly retryAfter: number;
  constructor(message: string, opts: ConstructorParameters<typeof ClaspError>[1] & { retryAfter?: number }) {
    super(message, opts);
    this.retryAfter = opts?.retryAfter ?? 1;
  }
}

/** No HTTP answer (connection refused or reset): the request may or may not have reached the server. */
export class ConnectionFailedError extends ClaspError {}

/** Builds the error of a non-2xx answer. */
export function errorFromAnswer(status: number, body: unknown, headers: Headers, fallback: string): ClaspError {
  let message = fallback;
  let code = status >= 500 ? "internal" : "not_clasp";
  let details: Record<string, unknown> = {};
  if (body && typeof body === "object" && typeof (body as { code?: unknown }).code === "string") {
    const b = body as { error?: string; code: string; details?: Record<string, unknown> };
    message = b.error || fallback;
    code = b.code;
    if (b.details && typeof b.details === "object") details = b.details;
  }
  const requestId = headers.get("X-Request-Id") ?? (details.requestId as string | undefined) ?? null;
  const opts = { status, code, details, requestId };
  if (status === 429) {
    let retryAfter = Number(headers.get("Retry-After") ?? details.retryAfterSeconds ?? 1);
    if (!Number.isFinite(retryAfter) || retryAfter < 0) retryAfter = 1;
    return new RateLimitedError(message, { ...opts, retryAfter });
  }
  if (status === 401) return new UnauthorizedError(message, opts);
  if (status === 409 && code === "run_not_live") return new RunNotLiveError(message, opts);
  if (status === 409) return new ConflictError(message, opts);
  return new ClaspError(message, opts);
}
