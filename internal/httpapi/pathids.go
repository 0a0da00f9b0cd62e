package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/clasp-dev/clasp"
)

// Ids in paths and query parameters. A value that cannot be an id of its
// kind is bad input (400 invalid_request naming the parameter); a
// well-formed id that names nothing visible to the caller is 404
// not_found (RULES.md, Errors and requests).

// idKind is what a path parameter or query filter names.
type idKind struct {
	// what names the id in messages: "an agent id".
	what string
	// issueRef: an issue's UUID or its identifier (PREFIX-N); else a UUID.
	issueRef bool
}

// pathIDKinds maps the collection segment before a path wildcard
// ("/api/agents/{id}") to the kind of id the wildcard takes. Every
// wildcard of a route registered with Server.handle must follow one of
// these (pathParams panics otherwise).
var pathIDKinds = map[string]idKind{
	"companies":   {what: "a company id"},
	"agents":      {what: "an agent id"},
	"runs":        {what: "a run id"},
	"keys":        {what: "an API key id"},
	"comments":    {what: "a comment id"},
	"issues":      {what: "an issue id", issueRef: true},
	"tokens":      {what: "an operator token id"},
	"gate-tokens": {what: "a gate token id"},
	"webhooks":    {what: "a webhook id"},
	// A delivery of a webhook (RULES.md W4).
	"webhook-deliveries": {what: "a webhook delivery id"},
}

// pathID is one wildcard of a route's pattern and the id it takes.
type pathID struct {
	name string // the wildcard's name: "id", "companyId", "keyId", "commentId"
	kind idKind
}

// pathParams returns the wildcards of a mux pattern ("DELETE
// /api/agents/{id}/keys/{keyId}") with the kind of id each takes, read
// from the segment before it. It panics for a wildcard that follows no
// collection of pathIDKinds: a route whose ids nothing would check.
func pathParams(pattern string) []pathID {
	_, path, _ := strings.Cut(pattern, " ")
	segs := strings.Split(path, "/")
	var out []pathID
	for i, seg := range segs {
		if !strings.HasPrefix(seg, "{") {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(seg, "{"), "}")
		kind, ok := idKind{}, false
		if i > 0 {
			kind, ok = pathIDKinds[segs[i-1]]
		}
		if !ok {
			panic(fmt.Sprintf("httpapi: route %s: wildcard {%s} follows no known collection (pathIDKinds)", pattern, name))
		}
		out = append(out, pathID{name: name, kind: kind})
	}
	return out
}

// checkPathIDs answers 400 invalid_request, details.field the wildcard's
// name, for the first path parameter of r that cannot be an id of its
// kind: a UUID (any case) for companies, agents, runs, keys and comments;
// for issues a UUID or an identifier (validIssueRef). It reads nothing
// from the store.
func checkPathIDs(r *http.Request, params []pathID) error {
	for _, p := range params {
		v := r.PathValue(p.name)
		if p.kind.issueRef {
			if !validIssueRef(v) {
				return clasp.InvalidField(p.name, "Path parameter %s must be an issue's UUID or its identifier (PREFIX-N, such as ENG-12), not %q.", p.name, truncate(v, 64))
			}
			continue
		}
		if _, ok := parseUUID(v); !ok {
			return clasp.InvalidField(p.name, "Path parameter %s must be %s (a UUID), not %q.", p.name, p.kind.what, truncate(v, 64))
		}
	}
	return nil
}

// validIssueRef reports whether ref has the shape of an issue reference:
// a UUID, or an identifier PREFIX-N (2 to 10 ASCII letters in either case,
// a hyphen, decimal digits; surrounding spaces ignored, as the stores
// ignore them), at most maxRefLen bytes. Whether an issue has it is the
// store's to say (404).
func validIssueRef(ref string) bool {
	if _, ok := parseUUID(ref); ok {
		return true
	}
	if len(ref) > maxRefLen {
		return false
	}
	prefix, n, ok := strings.Cut(strings.TrimSpace(ref), "-")
	if !ok || len(prefix) < 2 || len(prefix) > 10 || n == "" {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		if c := prefix[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return false
		}
	}
	return true
}

// uuidParam reads the query filter name, which names an id described by
// what ("an agent id (a UUID)"): "" when absent or empty, else its canonical UUID.
// 400 invalid_request naming the parameter when it is not a UUID or is
// given more than once (which one would win is a guess). Every filter of
// the API that names an id reads it with uuidParam.
func uuidParam(q url.Values, name, what string) (string, error) {
	if n := len(q[name]); n > 1 {
		return "", clasp.InvalidField(name, "Query parameter %s is given %d times; give it once.", name, n)
	}
	v := q.Get(name)
	if v == "" {
		return "", nil
	}
	id, ok := parseUUID(v)
	if !ok {
		return "", clasp.InvalidField(name, "Query parameter %s must be %s, not %q.", name, what, truncate(v, 64))
	}
	return id, nil
}

// pathUUID returns the path parameter name in canonical form; prepare
// (checkPathIDs) has refused the request unless it is a UUID.
func pathUUID(c *call, name string) string {
	id, _ := parseUUID(c.r.PathValue(name))
	return id
}
