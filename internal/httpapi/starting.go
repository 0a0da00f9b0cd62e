package httpapi

import (
	"net/http"

	"github.com/clasp-dev/clasp"
)

// StartingHandler is what a server answers while it is not yet able to
// serve (its database is not reachable yet): GET /healthz 200
// {"status":"starting","version","commit"} (the process is alive), every
// other request 503 {"error": message, "code": "unavailable", "details":
// {"requestId"}} with Retry-After: 1, /readyz included, so load balancers
// and agents wait. Every answer carries X-Request-Id (the caller's valid
// one, else a new one), as the running server's do. Nothing is read from or written to any store.
func StartingHandler(message string) http.Handler {
	body := errorBody{Error: message, Code: clasp.CodeUnavailable, Details: map[string]any{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rid := requestIDOf(r)
		w.Header().Set(RequestIDHeader, rid)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if r.URL.Path == "/healthz" && r.Method == http.MethodGet {
			b := clasp.Build()
			writeJSON(w, http.StatusOK, map[string]string{"status": "starting", "version": b.Version, "commit": b.Commit})
			return
		}
		closeIfBodyUnread(w, r, nil)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, withRequestID(body, rid))
	})
}
