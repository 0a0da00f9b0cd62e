// Package webhook is the dispatcher of webhook deliveries (RULES.md,
// Webhooks, W2-W5): a background loop of the server that claims due
// deliveries from the store's outbox (written by a trigger in the
// transaction of each change, W1), sends each as a signed JSON POST, and
// records the outcome: delivered on a 2xx, else retried with exponential
// backoff and jitter for up to 24 hours, then failed (its subscription
// failing). Any number of dispatchers, on any number of replicas, may run
// at once: a claim gives a delivery to one of them for a lease, and one
// whose dispatcher died is claimed again when the lease lapses.
package webhook

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// Defaults of Config's zero fields.
const (
	DefaultTimeout   = 10 * time.Second
	DefaultRetryBase = 10 * time.Second
	DefaultRetryMax  = time.Hour
	DefaultMaxAge    = 24 * time.Hour
	DefaultPoll      = 2 * time.Second
	DefaultWorkers   = 16
)

// Store is what the dispatcher needs of a store (store.WebhookStore's
// methods of the same names, and the activity wake-up).
type Store interface {
	WebhookClaim(ctx context.Context, claim string, limit int, lease time.Duration) ([]*store.WebhookJob, error)
	WebhookRecord(ctx context.Context, o *store.WebhookOutcome) error
	WebhookNextDue(ctx context.Context) (time.Duration, bool, error)
	WebhookAnyEnabled(ctx context.Context) (bool, error)
	WatchActivity(ctx context.Context) <-chan struct{}
}

// Config configures a Dispatcher; zero fields take the defaults.
type Config struct {
	// AllowPrivate lets deliveries reach loopback, private, link-local and
	// other non-public addresses (clasp serve --webhook-allow-private).
	AllowPrivate bool
	// Timeout bounds one attempt, from the dial to the end of the
	// answer's first bytes kept. Default 10 s.
	Timeout time.Duration
	// RetryBase is the delay after the first failed attempt; each later
	// failure doubles it, up to RetryMax, and a random part of up to half
	// of it is taken off (jitter). Defaults 10 s and 1 h.
	RetryBase time.Duration
	RetryMax  time.Duration
	// MaxAge is how long after a delivery was written (or redelivered)
	// attempts go on; a failure after that gives it up. Default 24 h.
	MaxAge time.Duration
	// Poll is the longest the loop waits without looking for due
	// deliveries (other replicas' writes on SQLite-less setups wake it
	// through the store; this is the fallback). Default 2 s.
	Poll time.Duration
	// Workers is how many deliveries are sent at once. Default 16.
	Workers int
	// UserAgent is the User-Agent of every delivery.
	UserAgent string
	// Logger receives failures. Default: discard.
	Logger *slog.Logger
	// Observe, when set, is called after each attempt's outcome is
	// recorded (for metrics and tests).
	Observe func(o *store.WebhookOutcome)
}

// Dispatcher sends the store's webhook deliveries. Start and Stop it once.
type Dispatcher struct {
	st     Store
	cfg    Config
	client *http.Client
	log    *slog.Logger

	nudge  chan struct{}
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// New returns a dispatcher of st's deliveries.
func New(st Store, cfg Config) *Dispatcher {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = DefaultRetryBase
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = DefaultRetryMax
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "clasp-webhook/" + clasp.Version()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Dispatcher{st: st, cfg: cfg, client: NewClient(cfg.Timeout, cfg.AllowPrivate), log: cfg.Logger,
		nudge: make(chan struct{}, 1)}
}

// NewClient returns the HTTP client of deliveries (RULES.md W5): no
// proxy, no redirect followed (a 3xx is the answer), timeout per attempt,
// and, unless allowPrivate, every connection refused whose resolved
// address is not public (checked at dial time, on the address actually
// dialled, so a name that resolves to a private address is refused too).
func NewClient(timeout time.Duration, allowPrivate bool) *http.Client {
	d := &net.Dialer{Timeout: timeout}
	if !allowPrivate {
		d.Control = func(network, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			return CheckAddr(net.ParseIP(host))
		}
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{
		Transport:     tr,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// ErrPrivateTarget is the error of a delivery to an address that is not
// public, without AllowPrivate.
var ErrPrivateTarget = errors.New("webhook target address is not public")

// CheckAddr returns ErrPrivateTarget (wrapped, naming ip) when ip is not
// a public unicast address: loopback, private (RFC 1918, fc00::/7),
// link-local, unspecified, multicast, carrier-grade NAT (100.64.0.0/10)
// or unparsable (nil).
func CheckAddr(ip net.IP) error {
	if ip == nil {
		return fmt.Errorf("%w: not an IP address", ErrPrivateTarget)
	}
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() || cgnat.Contains(ip) ||
		(len(ip) == net.IPv4len && ip[0] == 0) || ip.Equal(net.IPv4bcast) {
		return fmt.Errorf("%w: %s", ErrPrivateTarget, ip)
	}
	return nil
}

var cgnat = &net.IPNet{IP: net.IPv4(100, 64, 0, 0).To4(), Mask: net.CIDRMask(10, 32)}

// Nudge asks the loop to look for due deliveries now.
func (d *Dispatcher) Nudge() {
	select {
	case d.nudge <- struct{}{}:
	default:
	}
}

// Start runs the loop until ctx ends or Stop is called.
func (d *Dispatcher) Start(ctx context.Context) {
	ctx, d.cancel = context.WithCancel(ctx)
	d.done.Add(1)
	go func() {
		defer d.done.Done()
		d.loop(ctx)
	}()
}

// Stop ends the loop and waits for the attempts in flight to end (each
// is bounded by the timeout); their outcomes are recorded when the store
// still answers, else their claims lapse and they are sent again.
func (d *Dispatcher) Stop() {
	if d.cancel != nil {
		d.cancel()
	}
	d.done.Wait()
}

// lease is how long a claim lasts: longer than any attempt.
func (d *Dispatcher) lease() time.Duration { return 2*d.cfg.Timeout + 5*time.Second }

// loop runs rounds until ctx ends: at start, when a round's wait ends,
// when nudged, and when a write committed (the activity watch). A write
// wakes a round only while a delivery is pending or a subscription is
// enabled (enabled, read again at most every subscriptionsTTL): with
// neither, no write can create a delivery (W1), and a busy server would
// otherwise ask the store for due deliveries after every commit.
func (d *Dispatcher) loop(ctx context.Context) {
	watch := d.st.WatchActivity(ctx)
	free := make(chan struct{}, d.cfg.Workers) // one token per free worker
	for range d.cfg.Workers {
		free <- struct{}{}
	}
	var inflight sync.WaitGroup
	defer inflight.Wait()
	timer := time.NewTimer(0)
	defer timer.Stop()
	var (
		idle bool // the last round found no pending delivery
		subs subscriptions
	)
	for {
		wait := d.cfg.Poll
		if n := len(free); n > 0 {
			w, pending, err := d.round(ctx, free, &inflight)
			if err != nil && ctx.Err() == nil {
				d.log.Warn("webhook dispatcher", "err", err)
			}
			idle = !pending && err == nil
			wait = min(w, d.cfg.Poll)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
	sleep:
		select {
		case <-ctx.Done():
			return
		case <-watch:
			if idle && !subs.enabled(ctx, d.st) {
				goto sleep // no delivery pending, none can have been written
			}
		case <-d.nudge:
			subs = subscriptions{} // a nudge may follow a change of subscriptions
		case <-timer.C:
		}
	}
}

// subscriptionsTTL bounds how long the dispatcher trusts its last read of
// whether a subscription is enabled: a subscription enabled through
// another replica is noticed within it (that replica's own dispatcher,
// nudged by the change, sends at once).
const subscriptionsTTL = time.Second

// subscriptions is the dispatcher's last read of whether a subscription
// is enabled, and when it was taken (zero: never).
type subscriptions struct {
	at  time.Time
	any bool
}

// enabled reports whether a subscription is enabled, read from st when the
// last read is older than subscriptionsTTL; true when the read fails (the
// round that follows reports the store's trouble).
func (s *subscriptions) enabled(ctx context.Context, st Store) bool {
	if !s.at.IsZero() && time.Since(s.at) < subscriptionsTTL {
		return s.any
	}
	on, err := st.WebhookAnyEnabled(ctx)
	if err != nil {
		return true
	}
	s.at, s.any = time.Now(), on
	return on
}

// round claims as many due deliveries as there are free workers and
// starts their attempts; it returns how long to wait before the next
// round when nothing more is due, and whether a delivery is pending
// (due later, claimed, or not claimed for want of a free worker).
func (d *Dispatcher) round(ctx context.Context, free chan struct{}, inflight *sync.WaitGroup) (time.Duration, bool, error) {
	for {
		in, ok, err := d.st.WebhookNextDue(ctx)
		if err != nil {
			return d.cfg.Poll, true, err
		}
		if !ok {
			return d.cfg.Poll, false, nil
		}
		if in > 0 {
			return in, true, nil
		}
		n := len(free)
		if n == 0 {
			return d.cfg.Poll, true, nil // a finishing attempt nudges
		}
		jobs, err := d.st.WebhookClaim(ctx, newClaim(), n, d.lease())
		if err != nil {
			return d.cfg.Poll, true, err
		}
		if len(jobs) == 0 {
			// Due by the read, claimed by another replica meanwhile:
			// look again shortly rather than at once.
			return 50 * time.Millisecond, true, nil
		}
		for _, j := range jobs {
			<-free
			inflight.Add(1)
			go func() {
				defer inflight.Done()
				d.attempt(ctx, j)
				free <- struct{}{}
				d.Nudge()
			}()
		}
	}
}

func newClaim() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Body returns the body of a delivery of job j: a clasp.WebhookEvent for
// format json, {"text": clasp.SlackText} for format slack.
func Body(j *store.WebhookJob) ([]byte, error) {
	if j.Format == clasp.WebhookFormatSlack {
		return json.Marshal(map[string]string{"text": clasp.SlackText(j.Activity)})
	}
	return json.Marshal(&clasp.WebhookEvent{ID: j.ID, Event: j.Activity.Action, CompanyID: j.Activity.CompanyID,
		CreatedAt: j.Activity.CreatedAt, Activity: j.Activity})
}

// attempt sends j once and records the outcome (RULES.md W2).
func (d *Dispatcher) attempt(ctx context.Context, j *store.WebhookJob) {
	o := d.send(ctx, j)
	if !o.OK {
		o.Delay = d.backoff(j.Attempt)
		o.MaxAge = d.cfg.MaxAge
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := d.st.WebhookRecord(rctx, o); err != nil {
		d.log.Warn("record webhook delivery", "delivery", j.ID, "err", err)
		return
	}
	if !o.OK {
		d.log.Info("webhook delivery failed", "delivery", j.ID, "webhook", j.WebhookID, "attempt", j.Attempt,
			"status", o.Status, "err", o.Error, "retryIn", o.Delay)
	}
	if d.cfg.Observe != nil {
		d.cfg.Observe(o)
	}
}

// backoff is the delay after failed attempt n (from 1): RetryBase·2^(n-1)
// capped at RetryMax, less a random part of up to half of it.
func (d *Dispatcher) backoff(n int) time.Duration {
	delay := d.cfg.RetryBase
	for i := 1; i < n && delay < d.cfg.RetryMax; i++ {
		delay *= 2
	}
	delay = min(delay, d.cfg.RetryMax)
	half := delay / 2
	if half > 0 {
		delay -= time.Duration(mrand.Int64N(int64(half) + 1)) // #nosec G404 -- retry jitter, not a secret
	}
	return delay
}

// send makes one attempt of j: OK on a 2xx answer.
func (d *Dispatcher) send(ctx context.Context, j *store.WebhookJob) *store.WebhookOutcome {
	o := &store.WebhookOutcome{Job: j}
	body, err := Body(j)
	if err != nil {
		o.Error = "encode: " + err.Error()
		return o
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.URL, strings.NewReader(string(body)))
	if err != nil {
		o.Error = "request: " + err.Error()
		return o
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", d.cfg.UserAgent)
	req.Header.Set(clasp.HeaderEvent, j.Activity.Action)
	req.Header.Set(clasp.HeaderDelivery, j.ID)
	req.Header.Set(clasp.HeaderSignature, clasp.SignWebhook(j.Secret, time.Now(), body))
	start := time.Now()
	resp, err := d.client.Do(req)
	if err != nil {
		o.Latency = time.Since(start)
		// The URL is left out of the recorded error: it may carry a
		// secret (a Slack webhook's path).
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		o.Error = err.Error()
		if errors.Is(err, ErrPrivateTarget) {
			o.Error = "refused: " + ErrPrivateTarget.Error() + " (clasp serve --webhook-allow-private allows it): " + err.Error()
		}
		return o
	}
	kept, _ := io.ReadAll(io.LimitReader(resp.Body, store.WebhookBodyKeep))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	o.Latency = time.Since(start)
	o.Status, o.Body = resp.StatusCode, strings.ReplaceAll(strings.ToValidUTF8(string(kept), "\uFFFD"), "\x00", "")
	o.OK = resp.StatusCode >= 200 && resp.StatusCode < 300
	return o
}
