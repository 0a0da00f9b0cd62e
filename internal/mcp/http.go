package mcp

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// NewHTTPHandler returns the stateless Streamable HTTP MCP endpoint that
// `clasp serve` mounts at /mcp. Each request is its own session, acting with
// the request's bearer credential (an agent API key, or a run token, which
// names its run) and, with an API key, the run named in X-Clasp-Run-Id; it
// never opens, heartbeats or finishes runs. The tools call api, the clasp
// API handler of the same server, in process. The SDK's DNS-rebinding
// protection (a loopback connection must name a loopback Host) and
// cross-origin protection (browser requests from another origin are
// refused) stay on.
func NewHTTPHandler(api http.Handler, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hc := &http.Client{Transport: inProcess{api}}
	h := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		cfg := Config{URL: "http://clasp.internal", Token: strings.TrimSpace(token), RunID: r.Header.Get("X-Clasp-Run-Id"), HTTP: true}
		if cfg.RunID == "" {
			cfg.RunID = r.Header.Get("X-Paperclip-Run-Id")
		}
		return NewServer(NewSession(cfg, Options{HTTPClient: hc, Logger: log, Stateless: true, UserAgent: "clasp-mcp-http"}))
	}, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: log})
	return http.NewCrossOriginProtection().Handler(h)
}

// inProcess is an http.RoundTripper that serves requests with a handler of
// this process instead of a connection.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	r = r.Clone(r.Context())
	r.RemoteAddr = "127.0.0.1:0"
	r.RequestURI = r.URL.RequestURI()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}
