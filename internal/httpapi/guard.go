package httpapi

import (
	"context"
	"fmt"
	"math"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/clasp-dev/clasp"
)

// RequestIDHeader carries a request's id: a valid incoming value is kept,
// otherwise the server makes one; every answer echoes it.
const RequestIDHeader = "X-Request-Id"

// MaxHeaderBytes is the most header bytes (request line and header fields)
// a request may carry; more answers 431 headers_too_large as JSON.
// http.Server.MaxHeaderBytes should be HeaderReadLimit, so that requests
// between the two reach the handler and get the JSON answer.
const MaxHeaderBytes = 64 << 10

// HeaderReadLimit is what the http.Server should read of a request's
// header at most (its MaxHeaderBytes): twice MaxHeaderBytes. A header
// beyond it is cut off by net/http itself (a plain-text 431 and a closed
// connection) before any handler runs.
const HeaderReadLimit = 2 * MaxHeaderBytes

// Limits are the abuse limits of a Server. A zero field takes its default
// (the Default* constants below); a negative field turns that limit off.
type Limits struct {
	// AddressRate is the sustained requests per second one client address
	// may send (token bucket), AddressBurst the bucket's size. Over it: 429.
	AddressRate  float64
	AddressBurst int
	// CredentialRate and CredentialBurst are the same for one credential
	// (an agent key, a run token, the board token, or the local-trusted
	// board), counted after it authenticated.
	CredentialRate  float64
	CredentialBurst int
	// The limits below are an agent's, whatever credentials it uses: all
	// its API keys and every run it opens share one allowance, so that
	// opening more runs or keys never multiplies it.
	//
	// CommentsPerAgentMinute is the rate of comments an agent may write,
	// per minute, on this replica: a token bucket of that size refilled
	// evenly, so a burst of that many is allowed at once and a sustained
	// rate of that many a minute after it (at most twice that in the
	// first minute).
	CommentsPerAgentMinute int
	// CreatesPerAgentMinute is the same for every row an agent creates:
	// issues, comments and runs together, so that one agent cannot fill
	// the disk.
	CreatesPerAgentMinute int
	// LiveRunsPerAgent is the most live runs (queued, or running with an
	// unexpired lease) an agent may have, across every replica (decided
	// by the store, store.RunOpenParams.MaxLive); one more open is 429.
	LiveRunsPerAgent int
	// StreamsPerAgent caps the open event streams of one agent (of each
	// board credential for the board) on this replica, Streams those of
	// the whole server; one more answers 429.
	StreamsPerAgent int
	Streams         int
	// TrustedProxies are the addresses whose X-Forwarded-For is believed:
	// when the peer is one of them, the client address is the rightmost
	// X-Forwarded-For entry that is not a trusted proxy. Empty: the header
	// is ignored and the client address is the peer's.
	TrustedProxies []netip.Prefix
}

// Defaults of Limits: generous enough that a swarm of agents on one
// machine is never limited, tight enough that a runaway client is. (clasp
// bench's in-process server turns the per-address limit off: its 32
// clients on one address stand for agents on 32 machines, and together
// they send more than 5,000 requests a second.)
const (
	DefaultAddressRate            = 5000.0
	DefaultAddressBurst           = 10000
	DefaultCredentialRate         = 2000.0
	DefaultCredentialBurst        = 4000
	DefaultCommentsPerAgentMinute = 120
	DefaultCreatesPerAgentMinute  = 600
	DefaultLiveRunsPerAgent       = 16
	DefaultStreamsPerAgent        = 16
	DefaultStreams                = 1024
)

// withDefaults fills zero fields with the defaults.
func (l Limits) withDefaults() Limits {
	if l.AddressRate == 0 {
		l.AddressRate = DefaultAddressRate
	}
	if l.AddressBurst == 0 {
		l.AddressBurst = DefaultAddressBurst
	}
	if l.CredentialRate == 0 {
		l.CredentialRate = DefaultCredentialRate
	}
	if l.CredentialBurst == 0 {
		l.CredentialBurst = DefaultCredentialBurst
	}
	if l.CommentsPerAgentMinute == 0 {
		l.CommentsPerAgentMinute = DefaultCommentsPerAgentMinute
	}
	if l.CreatesPerAgentMinute == 0 {
		l.CreatesPerAgentMinute = DefaultCreatesPerAgentMinute
	}
	if l.LiveRunsPerAgent == 0 {
		l.LiveRunsPerAgent = DefaultLiveRunsPerAgent
	}
	if l.StreamsPerAgent == 0 {
		l.StreamsPerAgent = DefaultStreamsPerAgent
	}
	if l.Streams == 0 {
		l.Streams = DefaultStreams
	}
	return l
}

// ParseTrustedProxies parses a list of IP addresses and CIDR prefixes
// ("10.0.0.1", "10.0.0.0/8", "::1"). Error: the first entry that is neither.
func ParseTrustedProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q is neither an IP address nor a CIDR prefix", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

type ctxKey int

const requestIDKey ctxKey = iota

// RequestIDFrom returns the request id that the server's handler put in
// ctx, "" outside a request.
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// validRequestID reports whether an incoming X-Request-Id is kept: 1 to 128
// characters of letters, digits and - _ . : + / = (what tracing systems
// and proxies send), so that it is safe in logs and headers.
func validRequestID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("-_.:+/=", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// RequestIDOf returns the id the server gives r: its X-Request-Id when
// valid, else a new random UUID. Handlers outside the API (/mcp) name their
// answers by the same rule.
func RequestIDOf(r *http.Request) string { return requestIDOf(r) }

// requestIDOf returns the request's id: its X-Request-Id when valid, else
// a new random UUID.
func requestIDOf(r *http.Request) string {
	if v := r.Header.Get(RequestIDHeader); validRequestID(v) {
		return v
	}
	return uuid.NewString()
}

// headerBytes is the size of r's request line and header fields as sent
// (give or take the line ends' bytes), for the MaxHeaderBytes check.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	n += len(r.Host) + 8 // Host is moved out of r.Header
	return n
}

// clientAddr returns the address a request comes from: the peer's, or,
// when the peer is a trusted proxy, the rightmost X-Forwarded-For entry
// that is not itself a trusted proxy (entries further left are whatever
// the client wrote, and could be spoofed).
func (s *Server) clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if len(s.limits.TrustedProxies) == 0 {
		return host
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !s.trusted(peer.Unmap()) {
		return host
	}
	xff := r.Header.Values("X-Forwarded-For")
	var hops []string
	for _, v := range xff {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hops = append(hops, h)
			}
		}
	}
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(hops[i])
		if err != nil {
			// Garbage the proxy passed on: stop at it and count the
			// request against the last hop we can trust.
			return host
		}
		a = a.Unmap()
		if !s.trusted(a) {
			return a.String()
		}
		host = a.String()
	}
	return host
}

// ViaTLS reports whether r reached the client's side over TLS: it came
// over TLS itself, or from a trusted proxy (Limits.TrustedProxies) that
// says X-Forwarded-Proto: https. Answers over TLS carry
// Strict-Transport-Security and set cookies Secure.
func (s *Server) ViaTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if len(s.limits.TrustedProxies) == 0 || !strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https") {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	return err == nil && s.trusted(peer.Unmap())
}

// HSTS is the Strict-Transport-Security value of every answer over TLS
// (ViaTLS): two years, subdomains included.
const HSTS = "max-age=63072000; includeSubDomains"

// trusted reports whether a is in Limits.TrustedProxies.
func (s *Server) trusted(a netip.Addr) bool {
	for _, p := range s.limits.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// buckets holds one token bucket per key (a client address, a credential,
// a run). Buckets idle long enough to have refilled are dropped when the
// map grows, so memory stays bounded by the keys active in that time.
type buckets struct {
	rate  rate.Limit
	burst int
	off   bool

	mu      sync.Mutex
	m       map[string]*bucket
	lastGC  time.Time
	refillT time.Duration // how long an empty bucket takes to refill
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

// newBuckets returns buckets of perSecond tokens a second and burst size
// burst; off (no limit) when either is negative.
func newBuckets(perSecond float64, burst int) *buckets {
	b := &buckets{rate: rate.Limit(perSecond), burst: burst, m: map[string]*bucket{}}
	if perSecond < 0 || burst < 0 {
		b.off = true
		return b
	}
	b.refillT = time.Duration(float64(burst)/perSecond*float64(time.Second)) + time.Second
	return b
}

// limitState is the outcome of one take: whether it was allowed, the
// bucket's size, the tokens left, and (when refused) how long until one
// token is back.
type limitState struct {
	ok        bool
	limit     int
	remaining int
	retry     time.Duration
	reset     time.Duration // until the bucket is full again
}

// take takes one token from key's bucket at now.
func (b *buckets) take(key string, now time.Time) limitState {
	return b.decide(key, now, true)
}

// admit reports whether key's bucket has a token at now without taking
// it, and returns charge, which takes it: for a request that counts only
// once it is done (a row created), charged after it succeeded. Concurrent
// requests of one key admitted at once may each be charged, leaving the
// bucket in debt that later requests wait out, so the rate holds over
// time. charge is a no-op when the limit is off.
func (b *buckets) admit(key string, now time.Time) (st limitState, charge func()) {
	st = b.decide(key, now, false)
	if b.off || !st.ok {
		return st, func() {}
	}
	return st, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.entry(key, time.Now()).lim.ReserveN(time.Now(), 1)
	}
}

// entry returns key's bucket, made when missing; buckets idle long enough
// to have refilled are dropped first when the map is large. b.mu is held.
func (b *buckets) entry(key string, now time.Time) *bucket {
	e := b.m[key]
	if e == nil {
		if len(b.m) >= 4096 && now.Sub(b.lastGC) > time.Second {
			for k, v := range b.m {
				if now.Sub(v.used) > b.refillT {
					delete(b.m, k)
				}
			}
			b.lastGC = now
		}
		e = &bucket{lim: rate.NewLimiter(b.rate, b.burst)}
		b.m[key] = e
	}
	e.used = now
	return e
}

// decide is take (consume true) or admit's check (consume false) of key's
// bucket at now.
func (b *buckets) decide(key string, now time.Time, consume bool) limitState {
	if b.off {
		return limitState{ok: true}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entry(key, now)
	st := limitState{limit: b.burst}
	switch r := e.lim.ReserveN(now, 1); {
	case !r.OK():
		st.retry = time.Minute
	case r.DelayFrom(now) == 0:
		st.ok = true
		if !consume {
			r.CancelAt(now)
		}
	default:
		st.retry = r.DelayFrom(now)
		r.CancelAt(now)
	}
	tokens := e.lim.TokensAt(now)
	st.remaining = max(0, int(math.Floor(tokens)))
	if b.rate > 0 {
		st.reset = time.Duration((float64(b.burst) - tokens) / float64(b.rate) * float64(time.Second))
	}
	return st
}

// setHeaders writes the RateLimit-Limit, RateLimit-Remaining and
// RateLimit-Reset headers (seconds, rounded up) of st, and Retry-After
// when it was refused.
func (st limitState) setHeaders(h http.Header) {
	if st.limit == 0 {
		return
	}
	h.Set("RateLimit-Limit", strconv.Itoa(st.limit))
	h.Set("RateLimit-Remaining", strconv.Itoa(st.remaining))
	h.Set("RateLimit-Reset", strconv.Itoa(ceilSeconds(st.reset)))
	if !st.ok {
		h.Set("Retry-After", strconv.Itoa(max(1, ceilSeconds(st.retry))))
	}
}

func ceilSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int((d + time.Second - 1) / time.Second)
}

// rateLimited is the 429 rate_limited error of a refused take.
func rateLimited(what string, st limitState) error {
	return clasp.Errorf(clasp.CodeRateLimited, "Too many requests from this %s; retry after %d s.", what, max(1, ceilSeconds(st.retry))).
		WithDetails("limit", what).WithDetails("retryAfterSeconds", max(1, ceilSeconds(st.retry)))
}

// streamSlots counts open event streams per key (an agent, or a board
// credential: streamKey) and in total.
type streamSlots struct {
	perCred, total int
	mu             sync.Mutex
	open           map[string]int
	n              int
}

// acquire takes a slot for cred (a streamKey); false when it or the
// server is at its cap, which then says whose cap: "agent", "credential"
// or "server". The returned release gives the slot back.
func (ss *streamSlots) acquire(cred string) (release func(), which string, ok bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.total >= 0 && ss.n >= ss.total {
		return nil, "server", false
	}
	if ss.perCred >= 0 && ss.open[cred] >= ss.perCred {
		which = "credential"
		if strings.HasPrefix(cred, "agent:") {
			which = "agent"
		}
		return nil, which, false
	}
	ss.open[cred]++
	ss.n++
	var once sync.Once
	return func() {
		once.Do(func() {
			ss.mu.Lock()
			defer ss.mu.Unlock()
			ss.n--
			if ss.open[cred]--; ss.open[cred] <= 0 {
				delete(ss.open, cred)
			}
		})
	}, "", true
}

// streamKey names whose allowance of event streams a call takes from: its
// agent's, whatever key or run token it came with, or else (the board)
// its credential's.
func streamKey(c *call) string {
	if c.who.agent != nil {
		return "agent:" + c.who.agent.ID
	}
	return credentialKey(c.r)
}

// admitCreate checks that the calling agent's allowance of creates
// (Limits.CreatesPerAgentMinute) has room for one more row; the board is
// not limited. 429 rate_limited with Retry-After and RateLimit-* when it
// is used up. The caller calls charge once the row is created, so that
// only rows created count.
func (s *Server) admitCreate(c *call, what string) (charge func(), err error) {
	if c.who.agent == nil {
		return func() {}, nil
	}
	st, charge := s.creates.admit(c.who.agent.ID, time.Now())
	if st.ok {
		return charge, nil
	}
	st.setHeaders(c.w.Header())
	retry := max(1, ceilSeconds(st.retry))
	return charge, clasp.Errorf(clasp.CodeRateLimited, "This agent has created as many rows as it may for now (%d issues, comments and runs a minute together, refilled continuously); %s refused, retry after %d s.", s.limits.CreatesPerAgentMinute, what, retry).
		WithDetails("limit", "creates per agent per minute").WithDetails("retryAfterSeconds", retry)
}

// credentialKey names the credential of a request for the per-credential
// limits: the hash of its bearer token, or "local" for the tokenless
// local-trusted board.
func credentialKey(r *http.Request) string {
	_, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || strings.TrimSpace(token) == "" {
		return "local"
	}
	return HashToken(strings.TrimSpace(token))
}

// jsonContentType reports whether a request's Content-Type is JSON:
// application/json or application/<something>+json, with any parameters.
// A request without a Content-Type is accepted only when it has no body
// (checked by the caller).
func jsonContentType(v string) bool {
	mt, _, err := mime.ParseMediaType(v)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// checkContentEncoding refuses a POST, PUT or PATCH whose body is sent
// with a Content-Encoding other than identity (gzip, deflate, br, ...):
// 415 unsupported_media_type naming Content-Encoding. The server decodes
// no content coding, so such a body would otherwise be judged as JSON
// text and refused for what the compression made of it.
func checkContentEncoding(r *http.Request) error {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		return nil
	}
	for _, v := range r.Header.Values("Content-Encoding") {
		for _, coding := range strings.Split(v, ",") {
			if c := strings.TrimSpace(coding); c != "" && !strings.EqualFold(c, "identity") {
				return clasp.Errorf(clasp.CodeUnsupportedMediaType, "Request bodies must be sent uncompressed: Content-Encoding %s is not accepted; send the JSON as is, without Content-Encoding.", truncate(c, 32)).
					WithDetails("field", "Content-Encoding")
			}
		}
	}
	return nil
}

// checkContentType enforces JSON bodies on writes: a POST, PUT or PATCH
// that carries a body (or announces one) must say Content-Type:
// application/json, else 415 unsupported_media_type. A write without a
// body needs no Content-Type (a release or a heartbeat sent as a bare
// POST). Browsers send text/plain, form and multipart bodies cross-site
// without a preflight; this keeps them from ever reaching a handler.
func checkContentType(r *http.Request) error {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		return nil
	}
	ct := r.Header.Get("Content-Type")
	hasBody := r.ContentLength > 0 || r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody
	if ct == "" && !hasBody {
		return nil
	}
	if ct != "" && jsonContentType(ct) {
		return nil
	}
	shown := ct
	if shown == "" {
		shown = "none"
	}
	return clasp.Errorf(clasp.CodeUnsupportedMediaType, "Request bodies must be JSON sent with Content-Type: application/json, not %s.", truncate(shown, 64)).
		WithDetails("field", "Content-Type")
}
