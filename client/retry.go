package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"time"

	"github.com/clasp-dev/clasp"
)

// Backoff is a jittered exponential backoff. The n-th retry (n from 0)
// waits min(Max, Initial * Multiplier^n), reduced by a random fraction of
// up to Jitter (0..1; negative for none) of itself so that competing
// clients spread out. MaxAttempts bounds the attempts (0: until the context
// ends). Zero fields take the values of DefaultBackoff.
type Backoff struct {
	Initial     time.Duration
	Max         time.Duration
	Multiplier  float64
	Jitter      float64
	MaxAttempts int
}

// DefaultBackoff returns 100 ms initial, 5 s max, multiplier 2, jitter 0.5,
// no attempt limit.
func DefaultBackoff() Backoff {
	return Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Multiplier: 2, Jitter: 0.5}
}

func (b Backoff) withDefaults() Backoff {
	d := DefaultBackoff()
	if b.Initial <= 0 {
		b.Initial = d.Initial
	}
	if b.Max <= 0 {
		b.Max = d.Max
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if b.Multiplier < 1 {
		b.Multiplier = d.Multiplier
	}
	switch {
	case b.Jitter == 0:
		b.Jitter = d.Jitter
	case b.Jitter < 0:
		b.Jitter = 0
	case b.Jitter > 1:
		b.Jitter = 1
	}
	return b
}

// Delay returns the wait before retry n (n counts from 0).
func (b Backoff) Delay(n int) time.Duration {
	b = b.withDefaults()
	d := float64(b.Initial) * math.Pow(b.Multiplier, float64(n))
	if d > float64(b.Max) || math.IsInf(d, 0) || math.IsNaN(d) {
		d = float64(b.Max)
	}
	if b.Jitter > 0 {
		d -= d * b.Jitter * mrand.Float64() // #nosec G404 -- retry jitter, not a secret
	}
	return time.Duration(d)
}

// sleep waits d or until ctx ends (then it returns ctx.Err()).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type idempotencyKeyCtx struct{}

// WithIdempotencyKey returns a context whose creating calls (IssueCreate,
// CommentCreate, RunOpen) and IssueUpdate send key as the Idempotency-Key
// header. With a
// key set, such a call is retried (up to 5 attempts, with DefaultBackoff)
// after connection errors and 409 idempotency_in_flight, because the server
// answers a repeat of the same key from the same actor with the first
// response and creates nothing (RULES.md, Errors and requests). Use one key per logical
// create, e.g. from NewIdempotencyKey.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKeyCtx{}, key)
}

func idempotencyKey(ctx context.Context) string {
	k, _ := ctx.Value(idempotencyKeyCtx{}).(string)
	return k
}

// NewIdempotencyKey returns a random key (32 hex digits).
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// CheckoutWithRetry checks the issue out like IssueCheckout and, while the
// answer is transient, waits by b and tries again until ctx ends or
// b.MaxAttempts is reached. Transient are: 409 checkout_conflict with reason
// held_by_live_run (another live run holds it; it may release or die), and
// connection errors. Every other answer, including checkout_conflict for
// assigned_to_other_agent or status_not_expected, returns at once. When it
// gives up it returns the last error (wrapped, so clasp.ErrorCode and
// IsConflict still see it). A checkout by the same run is idempotent (rule
// L2), so a retry after a lost answer is safe.
func (c *Client) CheckoutWithRetry(ctx context.Context, ref string, req CheckoutRequest, b Backoff) (*clasp.Issue, error) {
	b = b.withDefaults()
	var lastErr error
	for attempt := 0; ; attempt++ {
		iss, err := c.IssueCheckout(ctx, ref, req)
		if err == nil {
			return iss, nil
		}
		if ctx.Err() != nil && lastErr != nil {
			// The context ended during this attempt: report why we were
			// still waiting.
			return nil, fmt.Errorf("checkout %s: gave up after %d attempts (%v): %w", ref, attempt, ctx.Err(), lastErr)
		}
		if !retryableCheckout(err) {
			return nil, err
		}
		lastErr = err
		if b.MaxAttempts > 0 && attempt+1 >= b.MaxAttempts {
			return nil, fmt.Errorf("checkout %s: gave up after %d attempts: %w", ref, attempt+1, err)
		}
		d := b.Delay(attempt)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
			// The next attempt would start after the deadline.
			return nil, fmt.Errorf("checkout %s: gave up after %d attempts (deadline): %w", ref, attempt+1, err)
		}
		if sleep(ctx, d) != nil {
			return nil, fmt.Errorf("checkout %s: gave up after %d attempts (%v): %w", ref, attempt+1, ctx.Err(), err)
		}
	}
}

// retryableCheckout reports whether a checkout error may go away by itself.
func retryableCheckout(err error) bool {
	if isConnError(err) {
		return true
	}
	e := clasp.AsError(err)
	if e == nil || e.Code != clasp.CodeCheckoutConflict {
		return false
	}
	reason, _ := e.Details["reason"].(string)
	return reason == clasp.ReasonHeldByLiveRun
}
