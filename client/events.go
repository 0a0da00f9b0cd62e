package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/clasp-dev/clasp"
)

// EventsOptions tunes Events.
type EventsOptions struct {
	// AfterID resumes after this activity id; 0 replays the whole history.
	// Negative (the default through NewEventsOptions) starts with rows
	// written from the moment the stream opens.
	AfterID int64
	// Actions, when not empty, narrows the stream to these actions.
	Actions []string
	// MaxBackoff bounds the wait between reconnections (default 5 s).
	MaxBackoff time.Duration
	// OnReconnect, when set, is called each time a connection fails or
	// its stream breaks, with why and how long Events waits before it
	// connects again (to tell a person the stream is down).
	OnReconnect func(err error, wait time.Duration)
	// OnConnect, when set, is called each time the server accepts a
	// connection's stream (the first and every reconnection).
	OnConnect func()
}

// Events follows the company's live event stream (GET
// /api/companies/{companyId}/events, Server-Sent Events) and calls fn with
// each activity row, oldest first. After a dropped connection it
// reconnects with jittered backoff and resumes after the last id it
// delivered (Last-Event-ID), or, before any, after the id the first
// connection started from, so no row is skipped or repeated. It returns
// ctx's error when ctx ends, fn's error when fn fails, and a *clasp.Error
// when the server refuses the stream (403 for another company's agent, 404
// for an unknown company).
func (c *Client) Events(ctx context.Context, companyID string, opt EventsOptions, fn func(*clasp.Activity) error) error {
	after := opt.AfterID
	maxBackoff := opt.MaxBackoff
	if maxBackoff <= 0 {
		maxBackoff = 5 * time.Second
	}
	backoff := 100 * time.Millisecond
	for {
		delivered, err := c.eventsOnce(ctx, companyID, after, opt.Actions, opt.OnConnect, func(start int64) {
			if after < 0 {
				after = start
			}
		}, func(a *clasp.Activity) error {
			after = a.ID
			return fn(a)
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if _, ok := err.(*clasp.Error); ok {
			return err
		}
		if err != nil && !isConnError(err) && !isStreamError(err) {
			return err
		}
		if delivered {
			backoff = 100 * time.Millisecond
		}
		wait := time.Duration(float64(backoff) * (0.5 + rand.Float64())) // #nosec G404 -- reconnect jitter, not a secret
		if opt.OnReconnect != nil {
			opt.OnReconnect(err, wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// streamError marks a stream that ended or broke after it was accepted.
type streamError struct{ err error }

func (e *streamError) Error() string { return "event stream: " + e.err.Error() }
func (e *streamError) Unwrap() error { return e.err }

func isStreamError(err error) bool {
	_, ok := err.(*streamError)
	return ok
}

// streamStart is the comment line that opens every event stream and names
// the activity id it starts after (the newest row when the request named
// none).
const streamStart = ": clasp events for company "

// eventsOnce reads one connection of the stream; delivered reports whether
// any event reached fn. start gets the id the stream says it starts after,
// so that a stream that opened "from now" and broke before any row
// resumes there instead of from a later "now", skipping what was written
// in between.
func (c *Client) eventsOnce(ctx context.Context, companyID string, after int64, actions []string, connected func(), start func(int64), fn func(*clasp.Activity) error) (delivered bool, err error) {
	u := c.base + "/api" + pathf("/companies/%s/events", companyID)
	if len(actions) > 0 {
		u += "?action=" + strings.Join(actions, ",")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, fmt.Errorf("build events request: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.runID != "" {
		req.Header.Set(RunIDHeader, c.runID)
	}
	if after >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return false, &connError{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return false, decodeError(resp)
	}
	if connected != nil {
		connected()
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data:"):
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		case strings.HasPrefix(line, streamStart):
			if i := strings.LastIndex(line, " after "); i >= 0 {
				if n, err := strconv.ParseInt(line[i+len(" after "):], 10, 64); err == nil && n >= 0 {
					start(n)
				}
			}
		case line == "" && data.Len() > 0:
			var a clasp.Activity
			if err := json.Unmarshal([]byte(data.String()), &a); err != nil {
				return delivered, &streamError{fmt.Errorf("decode event: %w", err)}
			}
			data.Reset()
			if err := fn(&a); err != nil {
				return delivered, err
			}
			delivered = true
		}
	}
	if err := sc.Err(); err != nil {
		return delivered, &streamError{err}
	}
	return delivered, &streamError{fmt.Errorf("server closed the stream")}
}
