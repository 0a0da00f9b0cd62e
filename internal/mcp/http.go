package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clasp-dev/clasp/internal/httpapi"
)

// NewHTTPHandler returns the stateless Streamable HTTP MCP endpoint that
// `clasp serve` mounts at /mcp. Each request is its own session, acting with
// the request's bearer credential (an agent API key, or a run token, which
// names its run) and, with an API key, the run named in X-Clasp-Run-Id; it
// never opens, heartbeats or finishes runs. The tools call api, the clasp
// API handler of the same server, in process. The SDK's cross-origin
// protection (browser requests from another origin are refused) stays on.
// Request bodies are capped at 1 MiB, as on the API (413
// above it), and every transport-level refusal (403, 405, 413, 415, a 400
// before the JSON-RPC layer) answers the API's JSON error body
// {"error", "code", "details"} instead of plain text.
//
// Requests from a loopback address must name a loopback Host (DNS-rebinding
// protection), except those from one of trustedProxies (a reverse proxy on
// the same host forwards the public Host). A credential header given twice
// (Authorization, X-Clasp-Run-Id, X-Paperclip-Run-Id) answers 400, as on
// the API.
func NewHTTPHandler(api http.Handler, log *slog.Logger, trustedProxies []netip.Prefix) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hc := &http.Client{Transport: inProcess{api}}
	h := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		cfg := Config{URL: "http://clasp.internal", Token: strings.TrimSpace(token), RunID: r.Header.Get("X-Clasp-Run-Id"), HTTP: true,
			PublicURL: publicURL(r, trustedProxies)}
		if cfg.RunID == "" {
			cfg.RunID = r.Header.Get("X-Paperclip-Run-Id")
		}
		return NewServer(NewSession(cfg, Options{HTTPClient: hc, Logger: log, Stateless: true, UserAgent: "clasp-mcp-http"}))
	}, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: log, MaxRequestBodyBytes: maxBody,
		DisableLocalhostProtection: true}) // checked below, with the trusted proxies
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "Cross-origin request refused: a browser page of another origin may not call /mcp.", http.StatusForbidden)
	}))
	inner := cop.Handler(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Like the API's answers, each answer of /mcp names its request (the
		// caller's valid X-Request-Id, else a new one), and the API calls its
		// tools make carry the same id into logs and activity rows.
		rid := httpapi.RequestIDOf(r)
		w.Header().Set(httpapi.RequestIDHeader, rid)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, rid))
		jw := &jsonErrors{ResponseWriter: w, requestID: rid}
		defer jw.flush()
		for _, h := range []string{"Authorization", "X-Clasp-Run-Id", "X-Paperclip-Run-Id"} {
			if n := len(r.Header.Values(h)); n > 1 {
				http.Error(jw, fmt.Sprintf("Header %s is given %d times; send it once", h, n), http.StatusBadRequest)
				return
			}
		}
		if rebinding(r, trustedProxies) {
			http.Error(jw, fmt.Sprintf("Forbidden: a request over loopback must name a loopback Host, not %q (a reverse proxy on this host: start clasp serve with --trusted-proxy)", r.Host), http.StatusForbidden)
			return
		}
		inner.ServeHTTP(jw, r)
	})
}

// publicURL is the server's root URL as the caller of r reached it: its
// scheme (https over TLS, or as a trusted proxy's X-Forwarded-Proto says)
// and its Host.
func publicURL(r *http.Request, trustedProxies []netip.Prefix) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	} else if p := r.Header.Get("X-Forwarded-Proto"); p == "https" {
		if peer, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
			for _, tp := range trustedProxies {
				if tp.Contains(peer.Addr().Unmap()) {
					scheme = "https"
				}
			}
		}
	}
	return scheme + "://" + r.Host
}

// rebinding reports whether r is a DNS-rebinding attempt: it reached a
// loopback address of this server but names a Host that is not loopback,
// and it does not come from one of the trusted proxies.
func rebinding(r *http.Request, trustedProxies []netip.Prefix) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil || !loopback(local.String()) || loopback(r.Host) {
		return false
	}
	if peer, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		for _, p := range trustedProxies {
			if p.Contains(peer.Addr().Unmap()) {
				return false
			}
		}
	}
	return true
}

// loopback reports whether hostport (a host with or without a port) is
// localhost or a loopback IP address.
func loopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// maxBody caps an /mcp request body: 1 MiB, the API's own cap.
const maxBody = 1 << 20

// transportCodes names the error code of each transport-level status of
// /mcp, in the API's vocabulary.
var transportCodes = map[int]string{
	http.StatusBadRequest:            "invalid_request",
	http.StatusForbidden:             "forbidden",
	http.StatusNotFound:              "not_found",
	http.StatusMethodNotAllowed:      "method_not_allowed",
	http.StatusNotAcceptable:         "not_acceptable",
	http.StatusConflict:              "conflict",
	http.StatusRequestEntityTooLarge: "body_too_large",
	http.StatusUnsupportedMediaType:  "unsupported_media_type",
	http.StatusInternalServerError:   "internal",
}

// jsonErrors is a ResponseWriter that turns a plain-text error answer (the
// SDK's http.Error) into the API's JSON error body, with the text as its
// sentence; every other answer passes through unchanged.
type jsonErrors struct {
	http.ResponseWriter
	requestID string       // the request's id, for details.requestId
	status    int          // the held error status; 0 while passing through
	buf       bytes.Buffer // the held error text
}

// requestIDKey is the context key of the /mcp request's id.
type requestIDKey struct{}

func (j *jsonErrors) WriteHeader(status int) {
	if status >= 400 && strings.HasPrefix(j.Header().Get("Content-Type"), "text/plain") {
		j.status = status
		return
	}
	j.ResponseWriter.WriteHeader(status)
}

func (j *jsonErrors) Write(p []byte) (int, error) {
	if j.status != 0 {
		return j.buf.Write(p)
	}
	return j.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer (the
// SDK flushes streamed answers through it).
func (j *jsonErrors) Unwrap() http.ResponseWriter { return j.ResponseWriter }

// flush writes the held error, if any, as {"error", "code", "details"}.
func (j *jsonErrors) flush() {
	if j.status == 0 {
		return
	}
	code, ok := transportCodes[j.status]
	if !ok {
		code = strings.ReplaceAll(strings.ToLower(http.StatusText(j.status)), " ", "_")
	}
	msg := strings.TrimSpace(j.buf.String())
	if j.status == http.StatusInternalServerError {
		msg = "internal error"
	}
	if msg != "" && !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	body, _ := json.Marshal(map[string]any{"error": msg, "code": code, "details": map[string]any{"requestId": j.requestID}})
	h := j.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	j.ResponseWriter.WriteHeader(j.status)
	_, _ = j.ResponseWriter.Write(body)
}

// inProcess is an http.RoundTripper that serves requests with a handler of
// this process instead of a connection.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	r = r.Clone(r.Context())
	if rid, ok := r.Context().Value(requestIDKey{}).(string); ok && r.Header.Get(httpapi.RequestIDHeader) == "" {
		r.Header.Set(httpapi.RequestIDHeader, rid)
	}
	r.RemoteAddr = "127.0.0.1:0"
	r.RequestURI = r.URL.RequestURI()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}
