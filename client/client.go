// Package client is the Go client of the clasp HTTP API (docs/api.md).
//
// It has one typed method per endpoint, taking and returning the root
// package's types (clasp.Issue, clasp.Run, ...). Every answer outside 2xx is
// returned as a *clasp.Error carrying the HTTP status, the stable code and
// the details of the server's JSON body, so callers match on codes:
//
//	iss, err := c.IssueCheckout(ctx, "ENG-7", client.CheckoutRequest{AgentID: me.ID, ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo}})
//	if clasp.ErrorCode(err) == clasp.CodeCheckoutConflict {
//		holder := clasp.AsError(err).Details["checkoutRunId"]
//		...
//	}
//
// A Client is safe for concurrent use. WithRun and WithToken return bound
// copies that share the underlying *http.Client.
//
// Creating calls (IssueCreate, CommentCreate, RunOpen) and IssueUpdate send
// the Idempotency-Key header set with WithIdempotencyKey on their context and,
// only then, retry after connection errors (the server answers a repeat with
// the first response). CheckoutWithRetry retries a checkout held by another
// live run with jittered exponential backoff until the context ends.
//
// The package imports only the standard library and the root clasp package.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/clasp-dev/clasp"
)

// RunIDHeader is the header naming the run a request acts in (RULES.md, Actors and credentials).
const RunIDHeader = "X-Clasp-Run-Id"

// IdempotencyKeyHeader is the header that makes a creating request safe to
// repeat (RULES.md, Errors and requests).
const IdempotencyKeyHeader = "Idempotency-Key"

// DefaultUserAgent is the product the User-Agent header names first when
// WithUserAgent is not used.
const DefaultUserAgent = "clasp-go-client"

// userAgentSuffix ends every User-Agent the client sends: the client's own
// product token with the version of the clasp build it is part of
// (clasp.Version), so servers can tell which client build called them.
var userAgentSuffix = "clasp-go-client/" + clasp.Version()

// maxErrorBody caps how much of an error response is read.
const maxErrorBody = 1 << 20

// Client calls one clasp server. Build it with New.
type Client struct {
	base      string // server root without trailing slash, e.g. http://127.0.0.1:3100
	token     string
	runID     string
	hc        *http.Client
	userAgent string
	caSet     bool // an option chose the HTTP client: $CLASP_CA_CERT is not read
}

// Option configures a Client in New.
type Option func(*Client)

// WithToken sets the bearer credential: an agent API key (clasp_ak_...), a
// run token (clasp_rt_..., which implies the run) or the board token
// (clasp_bt_...). Empty sends no Authorization header (the board under
// `clasp serve --local-trusted`).
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithRunID names the run every request acts in (header X-Clasp-Run-Id).
// Needed with an agent API key for checkout, release and owner-only writes;
// not needed with a run token.
func WithRunID(runID string) Option { return func(c *Client) { c.runID = runID } }

// WithHTTPClient sets the *http.Client used for requests (default
// http.DefaultClient). Its Timeout, if any, applies per attempt.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.hc, c.caSet = hc, hc != nil }
}

// EnvCACert names a PEM file of CA certificates to trust for the server's
// certificate, besides the system's: New reads it when no WithHTTPClient
// or WithCACert option is given.
const EnvCACert = "CLASP_CA_CERT"

// WithCACert makes the client trust the CA certificates of the PEM file
// caFile (besides the system's) for an https:// server, with TLS 1.2 or
// newer; it replaces any WithHTTPClient given before it. If the file
// cannot be read or holds no certificate, every call of the client fails
// with that error.
func WithCACert(caFile string) Option {
	return func(c *Client) {
		hc, err := NewHTTPClient(caFile)
		if err != nil {
			hc = &http.Client{Transport: errTransport{err}}
		}
		c.hc, c.caSet = hc, true
	}
}

// NewHTTPClient returns an *http.Client (a clone of the default transport)
// that trusts the system's CA certificates plus those of the PEM file
// caFile, with TLS 1.2 or newer. caFile "" trusts the system's alone.
// Error: the file cannot be read or holds no PEM certificate.
func NewHTTPClient(caFile string) (*http.Client, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile) // #nosec G304 G703 -- the caller names the CA file to trust
		if err != nil {
			return nil, fmt.Errorf("CA certificate file: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA certificate file %s holds no PEM certificate", caFile)
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	return &http.Client{Transport: tr}, nil
}

// errTransport fails every request with err (a CA file that could not be
// loaded).
type errTransport struct{ err error }

func (t errTransport) RoundTrip(*http.Request) (*http.Response, error) { return nil, t.err }

// WithUserAgent sets the product named first in the User-Agent header
// (e.g. "my-agent/1.0"); the client appends "clasp-go-client/<version>", so
// the header reads "my-agent/1.0 clasp-go-client/v1.2.3".
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a client of the server at baseURL, the server root such as
// "http://127.0.0.1:3100" (API paths get "/api" prepended; a trailing "/api"
// or slash on baseURL is ignored). Without WithHTTPClient or WithCACert, a
// file named by $CLASP_CA_CERT is trusted as by WithCACert.
func New(baseURL string, opts ...Option) *Client {
	base := strings.TrimRight(baseURL, "/")
	base = strings.TrimSuffix(base, "/api")
	c := &Client{base: base, hc: http.DefaultClient, userAgent: DefaultUserAgent}
	for _, o := range opts {
		o(c)
	}
	if ca := os.Getenv(EnvCACert); ca != "" && !c.caSet {
		WithCACert(ca)(c)
	}
	if c.hc == nil {
		c.hc = http.DefaultClient
	}
	switch c.userAgent {
	case "", DefaultUserAgent:
		c.userAgent = userAgentSuffix
	default:
		c.userAgent += " " + userAgentSuffix
	}
	return c
}

// BaseURL returns the server root the client calls.
func (c *Client) BaseURL() string { return c.base }

// RunID returns the run the client is bound to, or "".
func (c *Client) RunID() string { return c.runID }

// WithRun returns a copy of c bound to runID (X-Clasp-Run-Id); "" unbinds.
func (c *Client) WithRun(runID string) *Client {
	cp := *c
	cp.runID = runID
	return &cp
}

// WithToken returns a copy of c that authenticates with token.
func (c *Client) WithToken(token string) *Client {
	cp := *c
	cp.token = token
	return &cp
}

// request describes one API call.
type request struct {
	method string
	path   string     // path below the server root, already escaped, e.g. /api/issues/ENG-1
	query  url.Values // optional
	rawURL string     // absolute URL (a Link rel="next" target); overrides path and query
	body   any        // marshalled to JSON when not nil
	// idempotent marks a creating call: it sends the context's
	// Idempotency-Key and, when one is set, retries connection errors.
	idempotent bool
}

// do sends r and decodes a 2xx JSON body into out (when out is not nil).
// It returns the response headers of the final attempt.
func (c *Client) do(ctx context.Context, r request, out any) (http.Header, error) {
	var body []byte
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s body: %w", r.method, r.path, err)
		}
		body = b
	}
	u := r.rawURL
	if u == "" {
		u = c.base + r.path
		if len(r.query) > 0 {
			u += "?" + r.query.Encode()
		}
	}
	key := ""
	if r.idempotent {
		key = idempotencyKey(ctx)
	}
	if key == "" {
		return c.send(ctx, r.method, u, body, "", out)
	}
	// A creating call with an Idempotency-Key: a repeat is answered with the
	// first response, so connection errors (and a first attempt still in
	// flight) are retried a few times.
	b := DefaultBackoff()
	var lastErr error
	for attempt := 0; attempt < idempotentAttempts; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, b.Delay(attempt-1)); err != nil {
				return nil, lastErr
			}
		}
		h, err := c.send(ctx, r.method, u, body, key, out)
		if err == nil {
			return h, nil
		}
		lastErr = err
		if !isConnError(err) && clasp.ErrorCode(err) != clasp.CodeIdempotencyInFlight {
			return h, err
		}
	}
	return nil, lastErr
}

// idempotentAttempts bounds the attempts of a creating call with an
// Idempotency-Key.
const idempotentAttempts = 5

// connError marks a failure to get any HTTP answer (dial, reset, EOF before
// the status line): the request may or may not have reached the server.
type connError struct{ err error }

func (e *connError) Error() string { return e.err.Error() }
func (e *connError) Unwrap() error { return e.err }

// isConnError reports whether err is a transport failure (no HTTP answer).
func isConnError(err error) bool {
	var ce *connError
	return errors.As(err, &ce)
}

// IsConnectionError reports whether err is a failure to get any HTTP answer
// (connection refused or reset, EOF before the status line): the request
// may or may not have reached the server.
func IsConnectionError(err error) bool { return isConnError(err) }

// send performs one HTTP attempt.
func (c *Client) send(ctx context.Context, method, u string, body []byte, idemKey string, out any) (http.Header, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("build request %s %s: %w", method, u, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.runID != "" {
		req.Header.Set(RunIDHeader, c.runID)
	}
	if idemKey != "" {
		req.Header.Set(IdempotencyKeyHeader, idemKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s: %w", method, u, ctx.Err())
		}
		return nil, &connError{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.Header, decodeError(resp)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Header, nil
	}
	if raw, ok := out.(*rawBody); ok { // a non-JSON answer (a run log)
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return resp.Header, fmt.Errorf("read %s %s response: %w", method, u, err)
		}
		raw.data = data
		return resp.Header, nil
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		if ctx.Err() != nil {
			return resp.Header, fmt.Errorf("%s %s: %w", method, u, ctx.Err())
		}
		return resp.Header, fmt.Errorf("read %s %s response: %w", method, u, err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		if !json.Valid(data) {
			return resp.Header, notClasp(resp, data)
		}
		return resp.Header, fmt.Errorf("decode %s %s response: %w", method, u, err)
	}
	return resp.Header, nil
}

// decodeError turns a non-2xx response into a *clasp.Error with Status set.
// A body that is not a clasp error body gives a *NotClaspError (wrapping a
// *clasp.Error of code internal with the status text, plus the start of a
// short plain-text body, as message).
func decodeError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &clasp.Error{}
	if err := json.Unmarshal(raw, e); err != nil || e.Code == "" {
		return notClasp(resp, raw)
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Status = resp.StatusCode
	return e
}

func statusMessage(status int, body []byte) string {
	msg := http.StatusText(status)
	if msg == "" {
		msg = fmt.Sprintf("HTTP status %d", status)
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	if s != "" {
		msg += ": " + s
	}
	return msg
}

// IsConflict reports whether err is a 409 answer of any conflict code
// (checkout_conflict, ownership_conflict, run_not_live, already_exists,
// idempotency_in_flight).
func IsConflict(err error) bool {
	e := clasp.AsError(err)
	if e == nil {
		return false
	}
	if e.Status != 0 {
		return e.Status == http.StatusConflict
	}
	switch e.Code {
	case clasp.CodeCheckoutConflict, clasp.CodeOwnershipConflict, clasp.CodeRunNotLive,
		clasp.CodeAlreadyExists, clasp.CodeIdempotencyInFlight:
		return true
	}
	return false
}

// IsNotFound reports whether err is a 404 not_found answer.
func IsNotFound(err error) bool { return clasp.ErrorCode(err) == clasp.CodeNotFound }

// Page is one page of a list endpoint: Items in the server's order, and
// NextURL, the absolute URL of the following page taken from the response's
// Link rel="next" header ("" on the last page). A Page is bound to the
// client (and credentials) that fetched it.
type Page[T any] struct {
	Items   []T
	NextURL string
	c       *Client
}

// HasNext reports whether another page follows.
func (p *Page[T]) HasNext() bool { return p.NextURL != "" }

// NextCursor returns the cursor query parameter of NextURL, to resume a
// listing later with a List params' Cursor field; "" on the last page.
func (p *Page[T]) NextCursor() string {
	if p.NextURL == "" {
		return ""
	}
	u, err := url.Parse(p.NextURL)
	if err != nil {
		return ""
	}
	return u.Query().Get("cursor")
}

// Next fetches the page after p. On the last page it returns an empty Page
// and no error.
func (p *Page[T]) Next(ctx context.Context) (*Page[T], error) {
	if p.NextURL == "" {
		return &Page[T]{c: p.c}, nil
	}
	return getPage[T](ctx, p.c, request{method: http.MethodGet, rawURL: p.NextURL})
}

// All returns p's items followed by those of every following page.
func (p *Page[T]) All(ctx context.Context) ([]T, error) {
	all := append([]T(nil), p.Items...)
	for cur := p; cur.HasNext(); {
		next, err := cur.Next(ctx)
		if err != nil {
			return all, err
		}
		all = append(all, next.Items...)
		cur = next
	}
	return all, nil
}

// getPage fetches one page of a list endpoint and resolves its Link header.
func getPage[T any](ctx context.Context, c *Client, r request) (*Page[T], error) {
	var items []T
	h, err := c.do(ctx, r, &items)
	if err != nil {
		return nil, err
	}
	p := &Page[T]{Items: items, c: c}
	if next := nextLink(h.Values("Link")); next != "" {
		ref, err := url.Parse(next)
		if err != nil {
			return nil, fmt.Errorf("parse Link rel=next %q: %w", next, err)
		}
		reqURL := r.rawURL
		if reqURL == "" {
			reqURL = c.base + r.path
		}
		base, err := url.Parse(reqURL)
		if err != nil {
			return nil, fmt.Errorf("parse request URL %q: %w", reqURL, err)
		}
		p.NextURL = base.ResolveReference(ref).String()
	}
	return p, nil
}

// nextLink returns the target of the rel="next" link in Link header values
// (RFC 8288), or "".
func nextLink(values []string) string {
	for _, v := range values {
		for _, link := range splitLinks(v) {
			link = strings.TrimSpace(link)
			if !strings.HasPrefix(link, "<") {
				continue
			}
			end := strings.Index(link, ">")
			if end < 0 {
				continue
			}
			target := link[1:end]
			for _, param := range strings.Split(link[end+1:], ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(param), "=")
				if !ok || !strings.EqualFold(strings.TrimSpace(k), "rel") {
					continue
				}
				for _, rel := range strings.Fields(strings.Trim(strings.TrimSpace(val), `"`)) {
					if strings.EqualFold(rel, "next") {
						return target
					}
				}
			}
		}
	}
	return ""
}

// splitLinks splits a Link header value at the commas that separate links,
// not at commas inside <...> or quoted strings.
func splitLinks(v string) []string {
	var out []string
	inURI, inQuote, start := false, false, 0
	for i := 0; i < len(v); i++ {
		switch ch := v[i]; {
		case ch == '<' && !inQuote:
			inURI = true
		case ch == '>' && !inQuote:
			inURI = false
		case ch == '"' && !inURI:
			inQuote = !inQuote
		case ch == ',' && !inURI && !inQuote:
			out = append(out, v[start:i])
			start = i + 1
		}
	}
	return append(out, v[start:])
}

// pathf builds an API path, escaping each argument as one path segment.
func pathf(format string, args ...string) string {
	esc := make([]any, len(args))
	for i, a := range args {
		esc[i] = url.PathEscape(a)
	}
	return fmt.Sprintf(format, esc...)
}
