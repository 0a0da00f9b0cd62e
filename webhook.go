package clasp

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Webhook headers of every delivery (RULES.md, Webhooks, W2).
const (
	// HeaderEvent is the activity action a delivery carries ("issue.escalated").
	HeaderEvent = "Clasp-Event"
	// HeaderDelivery is the delivery's id, the same at every attempt and
	// redelivery: the receiver's key to drop duplicates.
	HeaderDelivery = "Clasp-Delivery"
	// HeaderSignature is "t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">"
	// with the subscription's secret.
	HeaderSignature = "Clasp-Signature"
)

// Webhook formats: the body a subscription's deliveries carry.
const (
	WebhookFormatJSON  = "json"  // a WebhookEvent
	WebhookFormatSlack = "slack" // {"text": ...}, what a Slack incoming webhook takes
)

// ActionIssueEscalated is written when an issue's runs ended failed or
// timed out the company's escalateAfterFailures times in a row and the
// issue was moved to blocked (RULES.md, Escalation, E1).
const ActionIssueEscalated = "issue.escalated"

// Webhook is a company's subscription to its activity (RULES.md,
// Webhooks). Secret is answered only by the create that made it (or set
// it); every other answer leaves it out.
type Webhook struct {
	ID        string   `json:"id"`
	CompanyID string   `json:"companyId"`
	URL       string   `json:"url"`
	Events    []string `json:"events"`
	Format    string   `json:"format"`
	Enabled   bool     `json:"enabled"`
	// Failing is true from the moment a delivery was given up (24 h of
	// failed attempts) until a delivery succeeds; FailingSince says when.
	Failing      bool       `json:"failing"`
	FailingSince *time.Time `json:"failingSince"`
	Secret       string     `json:"secret,omitempty"`
	CreatedAt    time.Time  `json:"createdAt"`
	UpdatedAt    time.Time  `json:"updatedAt"`
}

// Delivery statuses.
const (
	DeliveryPending   = "pending"   // not yet answered with a 2xx; retried until it is or 24 h passed
	DeliveryDelivered = "delivered" // a 2xx answered it
	DeliveryFailed    = "failed"    // given up after 24 h of failed attempts
)

// WebhookDelivery is one event sent (or to send) to one subscription: its
// delivery log entry (RULES.md, Webhooks, W4).
type WebhookDelivery struct {
	ID            string     `json:"id"`
	WebhookID     string     `json:"webhookId"`
	CompanyID     string     `json:"companyId"`
	ActivityID    int64      `json:"activityId"`
	Event         string     `json:"event"`
	EntityID      string     `json:"entityId"`
	Status        string     `json:"status"`
	Attempts      int        `json:"attempts"`
	NextAttemptAt *time.Time `json:"nextAttemptAt"`
	// LastStatus is the HTTP status of the last answer (null when the
	// last attempt got none: LastError says why); LastBody its first
	// 1 KiB; LatencyMs how long the last attempt took.
	LastStatus  *int       `json:"lastStatus"`
	LastBody    *string    `json:"lastBody"`
	LastError   *string    `json:"lastError"`
	LatencyMs   *int       `json:"latencyMs"`
	CreatedAt   time.Time  `json:"createdAt"`
	DeliveredAt *time.Time `json:"deliveredAt"`
}

// WebhookEvent is the JSON body of a delivery of format json: the
// delivery's id and event, and the activity row that caused it.
type WebhookEvent struct {
	ID        string    `json:"id"`
	Event     string    `json:"event"`
	CompanyID string    `json:"companyId"`
	CreatedAt time.Time `json:"createdAt"`
	Activity  *Activity `json:"activity"`
}

// SignWebhook returns the Clasp-Signature value of body sent at t with
// secret: "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<unix seconds>.body">".
func SignWebhook(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + webhookMAC(secret, ts, body)
}

func webhookMAC(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// VerifyWebhook checks a Clasp-Signature header value against body and
// secret, and that its time is within tolerance of now (0: no time
// check). It returns nil when a v1 signature matches; otherwise an error
// saying what is wrong.
func VerifyWebhook(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return fmt.Errorf("signature header %q lacks t= or v1=", header)
	}
	if tolerance > 0 {
		if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
			return fmt.Errorf("signature time %d is %s away from now", sec, d.Round(time.Second))
		}
	}
	want := webhookMAC(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return fmt.Errorf("no v1 signature matches the body")
}

// SlackText is the text of a delivery of format slack for activity a: one
// line naming the event, the entity and who did it, then the details.
func SlackText(a *Activity) string {
	var d map[string]any
	_ = json.Unmarshal(a.Details, &d)
	what := a.EntityType + " " + a.EntityID
	if ident, ok := d["identifier"].(string); ok && ident != "" {
		what = ident
	}
	text := fmt.Sprintf("clasp: %s %s by %s %s", a.Action, what, a.ActorType, a.ActorID)
	if msg, ok := d["summary"].(string); ok && msg != "" {
		text += "\n" + msg
	} else if len(a.Details) > 2 {
		text += "\n" + string(a.Details)
	}
	return text
}
