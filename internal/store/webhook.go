package store

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/clasp-dev/clasp"
)

// Webhooks (RULES.md, Webhooks, W1-W6): a company's subscriptions, their
// delivery log, and what the dispatcher (internal/webhook) claims and
// records. The deliveries are written by a trigger on activity, in the
// transaction of the change (W1); nothing here writes one.

// WebhookMaxEvents is the most patterns a subscription may list.
const WebhookMaxEvents = 64

// WebhookMaxURLLen is the longest URL a subscription may name.
const WebhookMaxURLLen = 2048

// WebhookBodyKeep is how much of an answer's body the delivery log keeps.
const WebhookBodyKeep = 1024

// WebhookCreateParams creates a subscription of CompanyID. Secret is the
// signing secret (the caller generates one when the request gave none);
// Format "" is json; Enabled nil is true.
type WebhookCreateParams struct {
	CompanyID string
	URL       string
	Events    []string
	Secret    string
	Format    string
	Enabled   *bool
}

// WebhookUpdateParams changes a subscription; nil fields stay.
type WebhookUpdateParams struct {
	ID      string
	URL     *string
	Events  []string // nil: unchanged
	Secret  *string
	Format  *string
	Enabled *bool
}

// WebhookJob is one delivery claimed by a dispatcher (WebhookClaim): what
// to send where, and the claim token that records its outcome.
type WebhookJob struct {
	Seq        int64
	ID         string // the delivery id (Clasp-Delivery)
	WebhookID  string
	Attempt    int // this attempt's number, from 1
	RetryFrom  time.Time
	URL        string
	Secret     string
	Format     string
	Activity   *clasp.Activity
	Claim      string
	ClaimedFor time.Duration
}

// WebhookOutcome is the result of one attempt of a claimed delivery.
// Status is the answer's HTTP status (0: no answer, Error says why);
// Body its first WebhookBodyKeep bytes. OK means a 2xx answered it. On
// failure Delay is when to try again and MaxAge how long after the
// delivery's retry window opened attempts may go on (W2).
type WebhookOutcome struct {
	Job     *WebhookJob
	OK      bool
	Status  int
	Body    string
	Error   string
	Latency time.Duration
	Delay   time.Duration
	MaxAge  time.Duration
}

// WebhookPatternValid reports whether p is an event pattern: "*", an
// action ("issue.escalated": lower-case letters, digits, _ and dots), or
// a prefix of one ending in ".*" ("issue.*").
func WebhookPatternValid(p string) bool {
	if p == "*" {
		return true
	}
	p = strings.TrimSuffix(p, ".*")
	if p == "" || len(p) > 100 || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") || strings.Contains(p, "..") {
		return false
	}
	for _, c := range p {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// webhookPatternMatchesAny reports whether valid pattern p matches at least
// one action of clasp.Actions: a subscription to no event would never be
// sent anything, which is a typo more often than an intent.
func webhookPatternMatchesAny(p string) bool {
	if p == "*" {
		return true
	}
	prefix, isPrefix := strings.CutSuffix(p, ".*")
	for _, a := range clasp.Actions {
		if a == p || isPrefix && strings.HasPrefix(a, prefix+".") {
			return true
		}
	}
	return false
}

// CheckWebhookURL returns 400 invalid_request (field url) unless u is an
// absolute http or https URL with a host, no user information and no
// fragment, at most WebhookMaxURLLen bytes. Which addresses it may reach
// is checked when it is sent (W5).
func CheckWebhookURL(u string) error {
	if len(u) > WebhookMaxURLLen {
		return clasp.InvalidField("url", "url is longer than %d bytes.", WebhookMaxURLLen)
	}
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.Hostname() == "" {
		return clasp.InvalidField("url", "url must be an absolute http:// or https:// URL with a host, not %q.", truncateText(u, 80))
	}
	if p.User != nil || p.Fragment != "" {
		return clasp.InvalidField("url", "url must carry no user information and no #fragment.")
	}
	return nil
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// checkWebhookEvents returns 400 invalid_request (field events) unless
// events is a non-empty list of at most WebhookMaxEvents valid patterns.
func checkWebhookEvents(events []string) error {
	if len(events) == 0 {
		return clasp.InvalidField("events", "events must list at least one action or pattern, such as \"issue.*\" or \"issue.escalated\".")
	}
	if len(events) > WebhookMaxEvents {
		return clasp.InvalidField("events", "events lists %d patterns; at most %d.", len(events), WebhookMaxEvents)
	}
	for _, e := range events {
		if !WebhookPatternValid(e) {
			return clasp.InvalidField("events", "%q is not an event pattern: an action such as issue.escalated, a prefix such as issue.*, or *.", truncateText(e, 80))
		}
		if !webhookPatternMatchesAny(e) {
			return clasp.InvalidField("events", "%q names no event clasp sends; the events are: %s (or a prefix such as issue.*, or *).", truncateText(e, 80), strings.Join(clasp.Actions, ", "))
		}
	}
	return nil
}

func checkWebhookFormat(f string) error {
	if f != clasp.WebhookFormatJSON && f != clasp.WebhookFormatSlack {
		return clasp.InvalidField("format", "format must be \"json\" or \"slack\", not %q.", truncateText(f, 40))
	}
	return nil
}

func checkWebhookSecret(s string) error {
	if len(s) < 16 || len(s) > 256 {
		return clasp.InvalidField("secret", "secret must be 16 to 256 characters.")
	}
	return nil
}

// scanWebhook reads a webhook row (id, company_id, url, events, format,
// enabled, failing_since, created_at, updated_at).
func scanWebhook(sc Row) (*clasp.Webhook, error) {
	var w clasp.Webhook
	var events string
	if err := sc.Scan(&w.ID, &w.CompanyID, &w.URL, &events, &w.Format, &w.Enabled, NullTime(&w.FailingSince),
		Time(&w.CreatedAt), Time(&w.UpdatedAt)); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(events), &w.Events); err != nil {
		return nil, fmt.Errorf("webhook %s: events: %w", w.ID, err)
	}
	w.Failing = w.FailingSince != nil
	return &w, nil
}

// scanDelivery reads a delivery log row and its seq.
func scanDelivery(sc Row) (*clasp.WebhookDelivery, int64, error) {
	var d clasp.WebhookDelivery
	var seq int64
	var lastStatus, latency *int64
	var attempts int64
	if err := sc.Scan(&d.ID, &d.WebhookID, &d.CompanyID, &d.ActivityID, &d.Event, &d.EntityID, &d.Status, &attempts,
		NullTime(&d.NextAttemptAt), &lastStatus, &d.LastBody, &d.LastError, &latency, Time(&d.CreatedAt),
		NullTime(&d.DeliveredAt), &seq); err != nil {
		return nil, 0, err
	}
	d.Attempts = int(attempts)
	if lastStatus != nil {
		v := int(*lastStatus)
		d.LastStatus = &v
	}
	if latency != nil {
		v := int(*latency)
		d.LatencyMs = &v
	}
	return &d, seq, nil
}

// WebhookCreate stores a subscription of p.CompanyID (RULES.md W1) and
// returns it with its secret. 400 invalid_request naming url, events,
// format or secret; 404 not_found for a missing company.
func (c CRUD) WebhookCreate(ctx context.Context, p *WebhookCreateParams) (*clasp.Webhook, error) {
	if p.Format == "" {
		p.Format = clasp.WebhookFormatJSON
	}
	enabled := true
	if p.Enabled != nil {
		enabled = *p.Enabled
	}
	for _, err := range []error{CheckWebhookURL(p.URL), checkWebhookEvents(p.Events), checkWebhookFormat(p.Format), checkWebhookSecret(p.Secret)} {
		if err != nil {
			return nil, err
		}
	}
	if _, err := c.CompanyGet(ctx, p.CompanyID); err != nil {
		return nil, err
	}
	events, _ := json.Marshal(p.Events)
	var out *clasp.Webhook
	err := c.d.Write(ctx, func(q Querier) error {
		w, err := scanWebhook(q.QueryRow(ctx, "WebhookInsert", Args{"id": c.d.NewID(), "company": p.CompanyID, "url": p.URL,
			"events": string(events), "secret": p.Secret, "format": p.Format, "enabled": enabled}))
		out = w
		return Wrap(err, "create webhook")
	})
	if err != nil {
		return nil, err
	}
	out.Secret = p.Secret
	return out, nil
}

// WebhookGet returns a subscription (without its secret); 404 not_found.
func (c CRUD) WebhookGet(ctx context.Context, id string) (*clasp.Webhook, error) {
	w, err := scanWebhook(c.d.Read().QueryRow(ctx, "WebhookGet", Args{"id": id}))
	if c.d.NoRows(err) {
		return nil, ErrNotFound("webhook", id)
	}
	if err != nil {
		return nil, c.d.Translate(fmt.Errorf("get webhook %s: %w", id, err))
	}
	return w, nil
}

// WebhookList returns a company's subscriptions, oldest first, without
// their secrets.
func (c CRUD) WebhookList(ctx context.Context, companyID string) ([]*clasp.Webhook, error) {
	out, err := queryAll(ctx, c.d.Read(), "WebhookList", Args{"company": companyID}, scanWebhook)
	if err != nil {
		return nil, c.d.Translate(fmt.Errorf("list webhooks: %w", err))
	}
	return out, nil
}

// WebhookUpdate changes the fields of p that are set and returns the
// subscription (with its secret when p set a new one). 400
// invalid_request naming the field; 404 not_found.
func (c CRUD) WebhookUpdate(ctx context.Context, p *WebhookUpdateParams) (*clasp.Webhook, error) {
	args := Args{"id": p.ID, "url": nil, "events": nil, "format": nil, "enabled": nil, "secret": nil}
	if p.URL != nil {
		if err := CheckWebhookURL(*p.URL); err != nil {
			return nil, err
		}
		args["url"] = *p.URL
	}
	if p.Events != nil {
		if err := checkWebhookEvents(p.Events); err != nil {
			return nil, err
		}
		b, _ := json.Marshal(p.Events)
		args["events"] = string(b)
	}
	if p.Format != nil {
		if err := checkWebhookFormat(*p.Format); err != nil {
			return nil, err
		}
		args["format"] = *p.Format
	}
	if p.Secret != nil {
		if err := checkWebhookSecret(*p.Secret); err != nil {
			return nil, err
		}
		args["secret"] = *p.Secret
	}
	if p.Enabled != nil {
		args["enabled"] = *p.Enabled
	}
	var out *clasp.Webhook
	err := c.d.Write(ctx, func(q Querier) error {
		w, err := scanWebhook(q.QueryRow(ctx, "WebhookUpdate", args))
		if c.d.NoRows(err) {
			return ErrNotFound("webhook", p.ID)
		}
		out = w
		return Wrap(err, "update webhook %s", p.ID)
	})
	if err != nil {
		return nil, err
	}
	if p.Secret != nil {
		out.Secret = *p.Secret
	}
	return out, nil
}

// WebhookDelete deletes a subscription and its delivery log; deliveries
// not yet sent are never sent. 404 not_found.
func (c CRUD) WebhookDelete(ctx context.Context, id string) error {
	return c.d.Write(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, "WebhookDelete", Args{"id": id})
		if err != nil {
			return Wrap(err, "delete webhook %s", id)
		}
		if n == 0 {
			return ErrNotFound("webhook", id)
		}
		return nil
	})
}

// WebhookDeliveryList returns a page of a subscription's delivery log,
// newest first (RULES.md W4), and the cursor of the next page ("" on the
// last). 400 invalid_request (cursor) for a cursor this did not answer.
func (c CRUD) WebhookDeliveryList(ctx context.Context, webhookID string, page Page) ([]*clasp.WebhookDelivery, string, error) {
	limit := PageLimit(page.Limit)
	var before int64
	if page.Cursor != "" {
		var err error
		if before, err = DecodeIDCursor(page.Cursor); err != nil {
			return nil, "", err
		}
	}
	rows, err := c.d.Read().Query(ctx, "WebhookDeliveryList", Args{"webhook": webhookID, "before": before, "limit": limit + 1})
	if err != nil {
		return nil, "", c.d.Translate(fmt.Errorf("list deliveries: %w", err))
	}
	defer rows.Close()
	var out []*clasp.WebhookDelivery
	var seqs []int64
	for rows.Next() {
		d, seq, err := scanDelivery(rows)
		if err != nil {
			return nil, "", c.d.Translate(fmt.Errorf("list deliveries: %w", err))
		}
		out, seqs = append(out, d), append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return nil, "", c.d.Translate(fmt.Errorf("list deliveries: %w", err))
	}
	next := ""
	if len(out) > limit {
		out, next = out[:limit], EncodeIDCursor(seqs[limit-1])
	}
	return out, next, nil
}

// WebhookDeliveryGet returns a delivery; 404 not_found.
func (c CRUD) WebhookDeliveryGet(ctx context.Context, id string) (*clasp.WebhookDelivery, error) {
	d, _, err := scanDelivery(c.d.Read().QueryRow(ctx, "WebhookDeliveryGet", Args{"id": id}))
	if c.d.NoRows(err) {
		return nil, ErrNotFound("webhook delivery", id)
	}
	if err != nil {
		return nil, c.d.Translate(fmt.Errorf("get delivery %s: %w", id, err))
	}
	return d, nil
}

// WebhookRedeliver makes a delivery pending and due at once, with the
// same id, and opens a new 24-hour retry window (RULES.md W4). 404
// not_found.
func (c CRUD) WebhookRedeliver(ctx context.Context, id string) (*clasp.WebhookDelivery, error) {
	var out *clasp.WebhookDelivery
	err := c.d.Write(ctx, func(q Querier) error {
		d, _, err := scanDelivery(q.QueryRow(ctx, "WebhookRedeliver", Args{"id": id}))
		if c.d.NoRows(err) {
			return ErrNotFound("webhook delivery", id)
		}
		out = d
		return Wrap(err, "redeliver %s", id)
	})
	return out, err
}

// WebhookClaim claims up to limit due deliveries for lease under the
// claim token claim (a fresh random string per call) and returns them in
// order, each with its subscription and activity row (RULES.md W3). A
// delivery whose claim lapses (its dispatcher died) is claimed again by
// a later call, of any replica.
func (c CRUD) WebhookClaim(ctx context.Context, claim string, limit int, lease time.Duration) ([]*WebhookJob, error) {
	var out []*WebhookJob
	err := c.d.Write(ctx, func(q Querier) error {
		out = nil
		n, err := q.Exec(ctx, "WebhookClaim", Args{"claim": claim, "limit": limit, "lease_us": lease.Microseconds()})
		if err != nil || n == 0 {
			return Wrap(err, "claim deliveries")
		}
		rows, err := q.Query(ctx, "WebhookClaimed", Args{"claim": claim})
		if err != nil {
			return Wrap(err, "read claimed deliveries")
		}
		defer rows.Close()
		for rows.Next() {
			j := &WebhookJob{Claim: claim, ClaimedFor: lease}
			var attempt int64
			a, err := ScanActivityExtra(prefixRow{rows, []any{&j.Seq, &j.ID, &j.WebhookID, &attempt, Time(&j.RetryFrom), &j.URL, &j.Secret, &j.Format}})
			if err != nil {
				return Wrap(err, "read claimed deliveries")
			}
			j.Attempt, j.Activity = int(attempt), a
			out = append(out, j)
		}
		return Wrap(rows.Err(), "read claimed deliveries")
	})
	return out, err
}

// prefixRow scans its first columns into prefix, then the rest into the
// destinations its Scan is given.
type prefixRow struct {
	r      Row
	prefix []any
}

func (p prefixRow) Scan(dest ...any) error { return p.r.Scan(append(p.prefix, dest...)...) }

// WebhookRecord records the outcome of one claimed attempt (RULES.md W2):
// delivered on a 2xx; otherwise due again after o.Delay, or failed (and
// its subscription failing) when that is past o.MaxAge from the opening
// of its retry window. It changes nothing when the claim is no longer
// the delivery's (it lapsed and another dispatcher claimed it).
func (c CRUD) WebhookRecord(ctx context.Context, o *WebhookOutcome) error {
	j := o.Job
	args := Args{"seq": j.Seq, "claim": j.Claim, "status": nilIfZero(o.Status), "body": nullable(o.Body),
		"error": nullable(o.Error), "latency": o.Latency.Milliseconds(),
		"delay_us": o.Delay.Microseconds(), "max_age_us": o.MaxAge.Microseconds()}
	return c.d.Write(ctx, func(q Querier) error {
		if o.OK {
			_, err := q.Exec(ctx, "WebhookDelivered", args)
			return Wrap(err, "record delivery %s", j.ID)
		}
		n, err := q.Exec(ctx, "WebhookRetry", args)
		if err != nil || n > 0 {
			return Wrap(err, "record attempt of %s", j.ID)
		}
		_, err = q.Exec(ctx, "WebhookGiveUp", args)
		return Wrap(err, "give up delivery %s", j.ID)
	})
}

func nilIfZero(n int) any {
	if n == 0 {
		return nil
	}
	return n
}

// WebhookNextDue returns how long until the next delivery a WebhookClaim
// could claim is due (0 or less: now), and false when none is pending.
// It only reads (RULES.md W3).
func (c CRUD) WebhookNextDue(ctx context.Context) (time.Duration, bool, error) {
	var us *int64
	if err := c.d.Read().QueryRow(ctx, "WebhookNextDue", Args{}).Scan(&us); err != nil {
		return 0, false, c.d.Translate(fmt.Errorf("next delivery due: %w", err))
	}
	if us == nil {
		return 0, false, nil
	}
	return time.Duration(*us) * time.Microsecond, true, nil
}

// WebhookAnyEnabled reports whether any subscription, of any company, is
// enabled (statement WebhookAnyEnabled): with none, the outbox writes no
// delivery (W1), so the dispatcher need not look after a write.
func (c CRUD) WebhookAnyEnabled(ctx context.Context) (bool, error) {
	var enabled bool
	if err := c.d.Read().QueryRow(ctx, "WebhookAnyEnabled", Args{}).Scan(&enabled); err != nil {
		return false, c.d.Translate(fmt.Errorf("read whether a webhook is enabled: %w", err))
	}
	return enabled, nil
}

// AttentionMax is the most items AttentionList answers.
const AttentionMax = 200

// AttentionList returns the issues of companyID that need a person,
// escalated ones first (RULES.md E5), at most AttentionMax.
func (c CRUD) AttentionList(ctx context.Context, companyID string) ([]*clasp.AttentionItem, error) {
	out, err := queryAll(ctx, c.d.Read(), "AttentionList", Args{"company": companyID, "limit": AttentionMax}, func(sc Row) (*clasp.AttentionItem, error) {
		var it clasp.AttentionItem
		var n int64
		if err := sc.Scan(&it.IssueID, &it.Identifier, &it.Title, &it.Status, &it.AssigneeAgentID, &it.Reason, Time(&it.Since), &n, &it.FailureLog); err != nil {
			return nil, err
		}
		it.RunFailures = int(n)
		return &it, nil
	})
	if err != nil {
		return nil, c.d.Translate(fmt.Errorf("list issues needing attention: %w", err))
	}
	return out, nil
}
