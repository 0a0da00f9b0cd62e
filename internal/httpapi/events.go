package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/clasp-dev/clasp"
)

// Event stream tuning. eventHeartbeat keeps proxies from closing an idle
// stream; eventPoll re-reads without a wake-up, as a safety net (and to
// pass holes in the ids that a store holds back, see store.ActivityStream).
const (
	eventHeartbeat = 15 * time.Second
	eventPoll      = time.Second
	eventBatch     = 500
)

// streamed is returned by serve functions that wrote their own response.
var streamed = new(struct{})

// companyEvents: GET /api/companies/{companyId}/events (board, or an agent
// of the company). A Server-Sent Events stream of the
// company's activity rows, oldest first: each event has `id:` the activity
// id, `event:` the action (issue.checked_out, issue.released, ...) and
// `data:` the activity JSON. It resumes after the Last-Event-ID header (or
// ?after=ID); without either it starts with rows written from now on
// (?after=0 replays the whole history). ?action=a,b narrows to actions.
// A comment line is sent every 15 s so proxies keep the stream open. The
// stream ends when the client goes away, the server shuts down, or its
// credential stops being valid: when the stream reads an activity row
// that may revoke one (a key revoked, an agent updated, a run ended; rows
// reach every replica's streams through store.WatchActivity, LISTEN/NOTIFY
// on PostgreSQL, within the 1 s re-read at worst) it authenticates its
// request again and ends with a last comment line if that fails. Open
// streams are capped per credential and in total (Limits): one more
// answers 429 rate_limited with Retry-After: 5 (streamRetryAfter). HEAD answers the stream's headers and ends at
// once.
// streamRetryAfter is the Retry-After, in seconds, of an event stream
// refused at its cap: a slot comes back only when an open stream ends, so
// a client is told to wait a few seconds rather than retry at once.
const streamRetryAfter = 5

func (s *Server) companyEvents(ctx context.Context, c *call) (int, any, error) {
	src := s.st
	companyID, err := s.companyID(ctx, c)
	if err != nil {
		return 0, nil, err
	}
	q := c.r.URL.Query()
	var actions map[string]bool
	if v := q.Get("action"); v != "" {
		actions = map[string]bool{}
		for _, a := range strings.Split(v, ",") {
			actions[strings.TrimSpace(a)] = true
		}
	}
	after := int64(-1)
	for _, src := range []struct{ name, v string }{{"Last-Event-ID", c.r.Header.Get("Last-Event-ID")}, {"after", q.Get("after")}} {
		if src.v == "" {
			continue
		}
		n, err := strconv.ParseInt(src.v, 10, 64)
		if err != nil || n < 0 {
			return 0, nil, clasp.InvalidField(src.name, "%s must be an activity id (a non-negative integer), not %q.", src.name, truncate(src.v, 32))
		}
		after = n
		break
	}
	release, which, ok := s.streams.acquire(streamKey(c))
	if !ok {
		c.w.Header().Set("Retry-After", strconv.Itoa(streamRetryAfter))
		return 0, nil, clasp.Errorf(clasp.CodeRateLimited, "Too many open event streams for this %s; close one first, or retry after %d s.", which, streamRetryAfter).
			WithDetails("limit", "event streams per "+which).WithDetails("retryAfterSeconds", streamRetryAfter)
	}
	defer release()
	// Subscribe before reading the start, so no commit falls between.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wake := src.WatchActivity(wctx)
	if after < 0 {
		if after, err = src.ActivityLatestID(ctx, companyID); err != nil {
			return 0, nil, err
		}
	}

	rc := http.NewResponseController(c.w)
	h := c.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	c.w.WriteHeader(http.StatusOK)
	if c.r.Method == http.MethodHead {
		// A HEAD answer has no body, so there is nothing to stream: the
		// client gets the stream's headers and the request ends, instead
		// of holding a stream slot until the client hangs up.
		return 0, streamed, nil
	}
	fmt.Fprintf(c.w, ": clasp events for company %s after %d\nretry: 2000\n\n", companyID, after) // #nosec G705 -- a text/event-stream, not HTML; companyID is the caller's company as found in the store
	if err := rc.Flush(); err != nil {
		return 0, streamed, nil
	}

	heartbeat := time.NewTicker(eventHeartbeat)
	defer heartbeat.Stop()
	poll := time.NewTimer(0) // read at once
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0, streamed, nil
		case <-s.stopped:
			return 0, streamed, nil
		case <-heartbeat.C:
			if _, err := fmt.Fprint(c.w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return 0, streamed, nil
			}
			continue
		case <-wake:
		case <-poll.C:
		}
		for {
			rows, through, err := src.ActivityAfter(ctx, companyID, after, eventBatch)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Error("event stream read", "company", companyID, "err", err)
				}
				return 0, streamed, nil
			}
			if mayRevoke(rows) {
				// The rows reach every replica: what this server believes
				// of the credentials they name is read again.
				s.creds.forgetRevoked(rows)
			}
			if c.who.board && !s.stillValid(c) {
				fmt.Fprint(c.w, ": credential revoked\n\n")
				_ = rc.Flush()
				s.log.Info("event stream closed: credential no longer valid", "company", companyID,
					"operator", c.who.op.id, "request_id", RequestIDFrom(ctx))
				return 0, streamed, nil
			}
			if !c.who.board && mayRevoke(rows) {
				s.creds.forgetKey(c.who.hash)
				if _, err := s.authenticate(c.r, c.ep); err != nil {
					if clasp.ErrorCode(err) == clasp.CodeUnauthenticated {
						fmt.Fprint(c.w, ": credential revoked\n\n")
						_ = rc.Flush()
						s.log.Info("event stream closed: credential no longer valid", "company", companyID,
							"agent", c.who.agent.ID, "request_id", RequestIDFrom(ctx))
						return 0, streamed, nil
					}
					if ctx.Err() == nil {
						s.log.Warn("event stream: re-authentication failed; checking again at the next row", "err", err)
					}
				}
			}
			for _, a := range rows {
				if actions != nil && !actions[a.Action] {
					continue
				}
				if err := writeEvent(c.w, a); err != nil {
					return 0, streamed, nil
				}
			}
			if len(rows) > 0 && rc.Flush() != nil {
				return 0, streamed, nil
			}
			moved := through > after
			after = through
			if len(rows) < eventBatch || !moved {
				break
			}
		}
		poll.Reset(eventPoll)
	}
}

// writeEvent writes one activity row as an SSE event.
func writeEvent(w http.ResponseWriter, a *clasp.Activity) error {
	data, err := json.Marshal(a)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", a.ID, a.Action, data) // #nosec G705 -- a text/event-stream, not HTML; data is JSON and action a fixed activity name
	return err
}

// mayRevoke reports whether rows hold a change that can end a credential:
// a key revoked, an agent updated (terminated), a run finished or lost.
func mayRevoke(rows []*clasp.Activity) bool {
	for _, a := range rows {
		switch a.Action {
		case clasp.ActionAgentKeyRevoked, clasp.ActionAgentUpdated, clasp.ActionRunFinished, clasp.ActionRunLost:
			return true
		}
	}
	return false
}
