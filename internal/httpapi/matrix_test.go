package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/clasp-dev/clasp"
)

// The permission matrix: every endpoint of routes.go
// against every kind of caller, on the real handler over a real SQLite
// store, each cell a deliberate expectation from RULES.md (Actors and
// credentials) and docs/api.md.

// actor is a column of the matrix: a kind of caller.
type actor int

const (
	actBoard      actor = iota // the board token
	actAgent                   // agent A of company C, key + header naming its live run RA
	actOtherCo                 // agent X of company D, key + header naming its own live run RX
	actRevoked                 // a revoked key of agent A, header RA
	actTerminated              // the key of agent T of C, terminated by the board (its runs ended)
	actNoAuth                  // no Authorization (the server is not local-trusted)
	actOtherRun                // agent B of C, its own key, header naming A's live run RA
	actTerminal                // agent A's key, header naming A's finished run RT
	actViewer                  // an operator token of role viewer, scoped to company C
	actOperatorC               // an operator token of role operator, scoped to company C
	actOperatorD               // an operator token of role operator, scoped to company D
	actGate                    // a gate token of company C: the gate's check alone (RULES.md G4)
	numActors
)

var actorNames = [numActors]string{"board", "agent", "otherCo", "revoked", "terminated", "noAuth", "otherRun", "terminalRun", "viewerC", "operatorC", "operatorD", "gateC"}

// Cell values: "status" or "status code" (the code of the JSON error body).
const (
	c200         = "200"
	c201         = "201"
	c204         = "204"
	cForbidden   = "403 forbidden"
	cNotOwned    = "403 run_not_owned"
	cUnauth      = "401 unauthenticated"
	cNotLive     = "409 run_not_live"
	cNotFound    = "404 not_found"
	cHdrMismatch = "400 invalid_request"
)

// mworld is one cell's fresh cast in company C (and D for the other company).
type mworld struct {
	c, d               *clasp.Company
	a, b, x, t         *clasp.Agent
	ka, kb, kx, kt     string
	revokedKey         string
	spareKeyID         string // a live key of A that DELETE may revoke
	ra, rx, rt         *clasp.Run
	issue              *clasp.Issue // in C, todo, unassigned
	newPrefix, newName string       // unique values for creating requests
	commentID          string       // a comment on issue, when the row's prep wrote one
	viewer, opC, opD   string       // operator tokens: viewer of C, operator of C, operator of D
	spareOperatorID    string       // an operator token that DELETE may revoke and rotate may replace
	gate               string       // a gate token of C
	spareGateID        string       // a gate token of C that DELETE may revoke
	hook, spareHook    string       // webhooks of C (every event); DELETE may delete spareHook
	deliveryID         string       // a delivery of hook
}

var matrixSeq atomic.Int64

// uniquePrefix returns a fresh issue prefix (upper-case letters).
func uniquePrefix(tag string) string {
	n := matrixSeq.Add(1)
	s := ""
	for {
		s = string(rune('A'+n%26)) + s
		n /= 26
		if n == 0 {
			break
		}
	}
	return tag + s
}

// mworldSetup builds a fresh cast for one cell, as the board.
func mworldSetup(b *bundle) *mworld {
	b.t.Helper()
	w := &mworld{c: b.company(uniquePrefix("MC")), d: b.company(uniquePrefix("MD"))}
	w.a, w.ka = b.agent(w.c.ID, "alpha")
	w.b, w.kb = b.agent(w.c.ID, "beta")
	w.t, w.kt = b.agent(w.c.ID, "gone")
	w.x, w.kx = b.agent(w.d.ID, "xeno")
	var k clasp.APIKey
	b.must(http.StatusCreated, "POST", "/api/agents/"+w.a.ID+"/keys", req{body: map[string]any{}}, &k)
	w.revokedKey = k.Token
	b.must(http.StatusOK, "DELETE", "/api/agents/"+w.a.ID+"/keys/"+k.ID, req{}, nil)
	b.must(http.StatusCreated, "POST", "/api/agents/"+w.a.ID+"/keys", req{body: map[string]any{}}, &k)
	w.spareKeyID = k.ID
	w.ra, w.rx, w.rt = b.run(w.ka), b.run(w.kx), b.run(w.ka)
	b.must(http.StatusOK, "POST", "/api/runs/"+w.rt.ID+"/finish", req{token: w.ka, body: map[string]any{"status": "succeeded"}}, nil)
	b.run(w.kt)
	b.must(http.StatusOK, "PATCH", "/api/agents/"+w.t.ID, req{body: map[string]any{"status": "terminated"}}, nil)
	var h clasp.Webhook
	b.must(http.StatusCreated, "POST", "/api/companies/"+w.c.ID+"/webhooks", req{body: map[string]any{"url": "https://example.com/hook", "events": []string{"*"}}}, &h)
	w.hook = h.ID
	b.must(http.StatusCreated, "POST", "/api/companies/"+w.c.ID+"/webhooks", req{body: map[string]any{"url": "https://example.com/spare", "events": []string{"*"}}}, &h)
	w.spareHook = h.ID
	w.issue = b.issue(w.c.ID, map[string]any{"status": "todo"})
	var ds []clasp.WebhookDelivery
	b.must(http.StatusOK, "GET", "/api/webhooks/"+w.hook+"/deliveries", req{}, &ds)
	w.deliveryID = ds[0].ID
	w.newPrefix, w.newName = uniquePrefix("MN"), fmt.Sprintf("new-%d", matrixSeq.Add(1))
	w.viewer = b.operatorToken("viewer", w.c.ID).Token
	w.opC = b.operatorToken("operator", w.c.ID).Token
	w.opD = b.operatorToken("operator", w.d.ID).Token
	w.spareOperatorID = b.operatorToken("viewer", "").ID
	var g clasp.GateToken
	b.must(http.StatusCreated, "POST", "/api/companies/"+w.c.ID+"/gate-tokens", req{body: map[string]any{"name": "matrix"}}, &g)
	w.gate = g.Token
	b.must(http.StatusCreated, "POST", "/api/companies/"+w.c.ID+"/gate-tokens", req{body: map[string]any{"name": "spare"}}, &g)
	w.spareGateID = g.ID
	return w
}

// credentials returns an actor's bearer token ("" for none), the run its
// header names ("" for none) and its agent ("" for the board or none).
func (w *mworld) credentials(b *bundle, a actor) (token, run, agentID string) {
	switch a {
	case actBoard:
		return b.board, "", ""
	case actAgent:
		return w.ka, w.ra.ID, w.a.ID
	case actOtherCo:
		return w.kx, w.rx.ID, w.x.ID
	case actRevoked:
		return w.revokedKey, w.ra.ID, w.a.ID
	case actTerminated:
		return w.kt, "", w.t.ID
	case actNoAuth:
		return "", "", ""
	case actOtherRun:
		return w.kb, w.ra.ID, w.b.ID
	case actTerminal:
		return w.ka, w.rt.ID, w.a.ID
	case actViewer:
		return w.viewer, "", ""
	case actOperatorC:
		return w.opC, "", ""
	case actOperatorD:
		return w.opD, "", ""
	case actGate:
		return w.gate, "", ""
	}
	panic("unknown actor")
}

// mrow is one endpoint: its routes.go pattern, the concrete path and body
// for a cell, and the expected answer per actor.
type mrow struct {
	pattern string
	// path returns the request path. For the run-in-path endpoints
	// (heartbeat, finish) the run is the path, so the caller sends no run
	// header and the path names the run the actor would act in: RA, except
	// for the terminal-run actor (RT). runInPath marks them.
	path      func(w *mworld) string
	runInPath bool
	body      func(w *mworld, agentID string) any
	want      [numActors]string
	// prep, when set, prepares the cell's world before the request.
	prep func(b *bundle, w *mworld)
}

func noBodyFn(*mworld, string) any { return nil }

func matrixRows() []mrow {
	C := func(w *mworld) string { return "/api/companies/" + w.c.ID }
	A := func(w *mworld) string { return "/api/agents/" + w.a.ID }
	I := func(w *mworld) string { return "/api/issues/" + w.issue.ID }
	fixed := func(p string) func(*mworld) string { return func(*mworld) string { return p } }
	empty := func(*mworld, string) any { return map[string]any{} }
	// Board-only rows: every agent credential gets 403 forbidden (the
	// access check precedes the run checks, so the run-naming actors are
	// refused for who they are, not for their run); bad credentials 401.
	boardOnly := func(ok string) [numActors]string {
		return [numActors]string{ok, cForbidden, cForbidden, cUnauth, cUnauth, cUnauth, cForbidden, cForbidden}
	}
	// ops sets the operator tokens' cells of a row: the viewer of C, the
	// operator of C, the operator of D. A viewer's every write is 403; an
	// operator of D sees nothing of C (404, as for ids that do not
	// exist); only admins manage operator tokens and create companies.
	ops := func(row [numActors]string, viewer, opC, opD string) [numActors]string {
		row[actViewer], row[actOperatorC], row[actOperatorD] = viewer, opC, opD
		return row
	}
	// read: a read of C's data; write: a write to it.
	read := func(row [numActors]string) [numActors]string {
		return ops(row, row[actBoard], row[actBoard], cNotFound)
	}
	write := func(row [numActors]string) [numActors]string { return ops(row, cForbidden, row[actBoard], cNotFound) }
	agentRoute := func(row [numActors]string) [numActors]string { return ops(row, cForbidden, cForbidden, cForbidden) }
	adminRoute := agentRoute
	// Agent-only rows about the calling agent itself: the other company's
	// agent is acting on its own data, so it succeeds; a header naming A's
	// run from B is run_not_owned, a terminal run run_not_live (RULES.md,
	// Actors and credentials: every request that names a run is checked).
	self := func(ok string) [numActors]string {
		return [numActors]string{cForbidden, ok, ok, cUnauth, cUnauth, cUnauth, cNotOwned, cNotLive}
	}
	// Company routes of C: another company's agent gets 403 (tenancy).
	company := func(ok string) [numActors]string {
		return [numActors]string{ok, ok, cForbidden, cUnauth, cUnauth, cUnauth, cNotOwned, cNotLive}
	}
	// Resources of C by id: another company's agent gets 404 (tenancy).
	byID := func(ok string) [numActors]string {
		return [numActors]string{ok, ok, cNotFound, cUnauth, cUnauth, cUnauth, cNotOwned, cNotLive}
	}
	public := [numActors]string{c200, c200, c200, c200, c200, c200, c200, c200, c200, c200, c200, c200}

	rows := []mrow{
		//       pattern                                        path                                   body
		{pattern: "GET /healthz", path: fixed("/healthz"), body: noBodyFn, want: public},
		{pattern: "GET /readyz", path: fixed("/readyz"), body: noBodyFn, want: public},
		{pattern: "GET /metrics", path: fixed("/metrics"), body: noBodyFn, want: public},
		{pattern: "GET /api/openapi.json", path: fixed("/api/openapi.json"), body: noBodyFn, want: public},

		{pattern: "POST /api/companies", path: fixed("/api/companies"), body: func(w *mworld, _ string) any {
			return map[string]any{"name": "New " + w.newPrefix, "issuePrefix": w.newPrefix}
		}, want: adminRoute(boardOnly(c201))},
		{pattern: "GET /api/companies", path: fixed("/api/companies"), body: noBodyFn, want: ops(boardOnly(c200), c200, c200, c200)},
		{pattern: "GET /api/companies/{companyId}", path: C, body: noBodyFn, want: read(boardOnly(c200))},
		{pattern: "POST /api/companies/{companyId}/agents", path: func(w *mworld) string { return C(w) + "/agents" }, body: func(w *mworld, _ string) any {
			return map[string]any{"name": w.newName}
		}, want: write(boardOnly(c201))},
		// Agents read their own company's agents, without adapters.
		{pattern: "GET /api/companies/{companyId}/agents", path: func(w *mworld) string { return C(w) + "/agents" }, body: noBodyFn, want: read(company(c200))},
		{pattern: "GET /api/agents/{id}", path: A, body: noBodyFn, want: read(byID(c200))},
		// Adapter and process settings are the board's alone.
		{pattern: "PATCH /api/agents/{id}", path: A, body: func(*mworld, string) any { return map[string]any{"status": "paused"} }, want: write(boardOnly(c200))},
		{pattern: "POST /api/agents/{id}/keys", path: func(w *mworld) string { return A(w) + "/keys" }, body: empty, want: write(boardOnly(c201))},
		{pattern: "GET /api/agents/{id}/keys", path: func(w *mworld) string { return A(w) + "/keys" }, body: noBodyFn, want: read(boardOnly(c200))},
		{pattern: "DELETE /api/agents/{id}/keys/{keyId}", path: func(w *mworld) string { return A(w) + "/keys/" + w.spareKeyID }, body: noBodyFn, want: write(boardOnly(c200))},
		// Wakeups: the board, or the agent itself (A has no adapter: the
		// wake is recorded as skipped); another company's agent does not
		// see A (404).
		{pattern: "POST /api/agents/{id}/wakeup", path: func(w *mworld) string { return A(w) + "/wakeup" }, body: empty, want: write(byID("202"))},

		// The board has no agent identity: 403 (an agent-only route).
		{pattern: "GET /api/agents/me", path: fixed("/api/agents/me"), body: noBodyFn, want: agentRoute(self(c200))},
		{pattern: "GET /api/agents/me/inbox-lite", path: fixed("/api/agents/me/inbox-lite"), body: noBodyFn, want: agentRoute(self(c200))},
		// Opening a run while naming a terminal run is refused too (every
		// request naming a run is checked); opening while naming another
		// live run is refused as well.
		{pattern: "POST /api/agents/me/runs", path: fixed("/api/agents/me/runs"), body: empty, want: agentRoute(self(c201))},
		// Claim-next: A's live run takes C's todo issue; the other
		// company's agent claims in its own company D, which has no issue
		// to take (204). The board has no run to claim in (403).
		{pattern: "POST /api/agents/me/claim", path: fixed("/api/agents/me/claim"), body: empty,
			want: agentRoute([numActors]string{cForbidden, c200, c204, cUnauth, cUnauth, cUnauth, cNotOwned, cNotLive})},

		// Heartbeat: the run's agent only (the board never carries a run).
		// Another company's run is not visible: 404 (ids of another
		// company), B naming A's run 403 run_not_owned, RT 409 run_not_live.
		{pattern: "POST /api/runs/{id}/heartbeat", runInPath: true, path: func(w *mworld) string { return "/api/runs/" + w.ra.ID + "/heartbeat" }, body: empty,
			want: agentRoute([numActors]string{cForbidden, c200, cNotFound, cUnauth, cUnauth, cUnauth, cNotOwned, cNotLive})},
		// Finish: the run's agent or the board.
		{pattern: "POST /api/runs/{id}/finish", runInPath: true, path: func(w *mworld) string { return "/api/runs/" + w.ra.ID + "/finish" }, body: func(*mworld, string) any {
			return map[string]any{"status": "succeeded"}
		}, want: write([numActors]string{c200, c200, cNotFound, cUnauth, cUnauth, cUnauth, cNotOwned, cNotLive})},
		{pattern: "GET /api/runs/{id}", path: func(w *mworld) string { return "/api/runs/" + w.ra.ID }, body: noBodyFn, want: read(byID(c200))},
		{pattern: "GET /api/companies/{companyId}/runs", path: func(w *mworld) string { return C(w) + "/runs" }, body: noBodyFn, want: read(company(c200))},
		// A run's log: the board or the run's own agent (RA has a
		// log file here); another company's run is not visible (404).
		{pattern: "GET /api/runs/{id}/log", path: func(w *mworld) string { return "/api/runs/" + w.ra.ID + "/log" }, body: noBodyFn, want: read(byID(c200)),
			prep: func(b *bundle, w *mworld) { writeRunLog(b, w.ra.ID, "hello\n") }},
		// Cancel is the board's: RA is self-reported, so it ends in the store.
		{pattern: "POST /api/runs/{id}/cancel", path: func(w *mworld) string { return "/api/runs/" + w.ra.ID + "/cancel" }, body: empty, want: write(boardOnly(c200))},

		{pattern: "POST /api/companies/{companyId}/issues", path: func(w *mworld) string { return C(w) + "/issues" }, body: func(*mworld, string) any {
			return map[string]any{"title": "created in the matrix"}
		}, want: write(company(c201))},
		{pattern: "GET /api/companies/{companyId}/issues", path: func(w *mworld) string { return C(w) + "/issues" }, body: noBodyFn, want: read(company(c200))},
		{pattern: "GET /api/issues/{id}", path: I, body: noBodyFn, want: read(byID(c200))},
		// The issue is todo and unlocked, so A's live run may PATCH it (L5).
		{pattern: "PATCH /api/issues/{id}", path: I, body: func(*mworld, string) any { return map[string]any{"title": "renamed"} }, want: write(byID(c200))},
		// agentId is the caller's own (the board assigns A: S12). The other
		// company's agent names itself and still cannot see the issue.
		{pattern: "POST /api/issues/{id}/checkout", path: func(w *mworld) string { return I(w) + "/checkout" }, body: func(w *mworld, agentID string) any {
			if agentID == "" {
				agentID = w.a.ID
			}
			return map[string]any{"agentId": agentID, "expectedStatuses": []string{"todo"}}
		}, want: write(byID(c200))},
		// Releasing an unlocked issue is a 200 no-op (L4).
		{pattern: "POST /api/issues/{id}/release", path: func(w *mworld) string { return I(w) + "/release" }, body: empty, want: write(byID(c200))},
		{pattern: "POST /api/issues/{id}/admin/force-release", path: func(w *mworld) string { return I(w) + "/admin/force-release" }, body: func(*mworld, string) any {
			return map[string]any{"reason": "matrix"}
		}, want: write(boardOnly(c200))},
		{pattern: "GET /api/issues/{id}/comments", path: func(w *mworld) string { return I(w) + "/comments" }, body: noBodyFn, want: read(byID(c200))},
		{pattern: "GET /api/issues/{id}/comments/{commentId}", path: func(w *mworld) string { return I(w) + "/comments/" + w.commentID }, body: noBodyFn, want: read(byID(c200)),
			prep: func(b *bundle, w *mworld) {
				var cm clasp.Comment
				b.must(http.StatusCreated, "POST", "/api/issues/"+w.issue.ID+"/comments", req{body: map[string]any{"body": "hello"}}, &cm)
				w.commentID = cm.ID
			}},
		{pattern: "GET /api/issues/{id}/heartbeat-context", path: func(w *mworld) string { return I(w) + "/heartbeat-context" }, body: noBodyFn, want: read(byID(c200))},
		{pattern: "POST /api/issues/{id}/comments", path: func(w *mworld) string { return I(w) + "/comments" }, body: func(*mworld, string) any {
			return map[string]any{"body": "a comment"}
		}, want: write(byID(c201))},
		{pattern: "GET /api/issues/{id}/activity", path: func(w *mworld) string { return I(w) + "/activity" }, body: noBodyFn, want: read(byID(c200))},
		{pattern: "GET /api/companies/{companyId}/activity", path: func(w *mworld) string { return C(w) + "/activity" }, body: noBodyFn, want: read(company(c200))},
		// The event stream: only the status line is read.
		{pattern: "GET /api/companies/{companyId}/events", path: func(w *mworld) string { return C(w) + "/events" }, body: noBodyFn, want: read(company(c200))},
		// Operators (RULES.md, Actors and credentials): every board
		// credential reads who it is; only admins manage operator tokens;
		// signing in opens a session with an operator token, of any role;
		// signing out needs a session (403 with a token).
		{pattern: "GET /api/operators/me", path: fixed("/api/operators/me"), body: noBodyFn, want: ops(boardOnly(c200), c200, c200, c200)},
		{pattern: "POST /api/operators/tokens", path: fixed("/api/operators/tokens"), body: func(*mworld, string) any {
			return map[string]any{"name": "matrix", "role": "viewer"}
		}, want: adminRoute(boardOnly(c201))},
		{pattern: "GET /api/operators/tokens", path: fixed("/api/operators/tokens"), body: noBodyFn, want: adminRoute(boardOnly(c200))},
		{pattern: "DELETE /api/operators/tokens/{id}", path: func(w *mworld) string { return "/api/operators/tokens/" + w.spareOperatorID }, body: noBodyFn, want: adminRoute(boardOnly(c200))},
		{pattern: "POST /api/operators/tokens/{id}/rotate", path: func(w *mworld) string { return "/api/operators/tokens/" + w.spareOperatorID + "/rotate" }, body: empty, want: adminRoute(boardOnly(c201))},
		{pattern: "POST /api/sessions", path: fixed("/api/sessions"), body: empty, want: ops(boardOnly(c201), c201, c201, c201)},
		{pattern: "DELETE /api/sessions/current", path: fixed("/api/sessions/current"), body: noBodyFn, want: ops(boardOnly(cForbidden), cForbidden, cForbidden, cForbidden)},
		// The git gate (RULES.md G4): its check answers a gate token alone
		// (the access check precedes the run checks); its tokens are an
		// admin's of the company.
		{pattern: "POST /api/gate/check", path: fixed("/api/gate/check"), body: func(w *mworld, _ string) any {
			return map[string]any{"stamps": []map[string]any{{"issue": w.issue.Identifier, "epoch": 0}}}
		}, want: [numActors]string{cForbidden, cForbidden, cForbidden, cUnauth, cUnauth, cUnauth, cForbidden, cForbidden, cForbidden, cForbidden, cForbidden, c200}},
		{pattern: "POST /api/companies/{companyId}/gate-tokens", path: func(w *mworld) string { return C(w) + "/gate-tokens" }, body: func(*mworld, string) any {
			return map[string]any{"name": "ci"}
		}, want: adminRoute(boardOnly(c201))},
		// A company's settings are its admins' to change (the body sets
		// the defaults again, so the other cells see no change).
		{pattern: "PATCH /api/companies/{companyId}", path: C, body: func(*mworld, string) any {
			return map[string]any{"branchTemplate": clasp.DefaultBranchTemplate, "escalateAfterFailures": clasp.DefaultEscalateAfterFailures}
		}, want: adminRoute(boardOnly(c200))},
		{pattern: "GET /api/companies/{companyId}/gate-tokens", path: func(w *mworld) string { return C(w) + "/gate-tokens" }, body: noBodyFn, want: adminRoute(boardOnly(c200))},
		{pattern: "POST /api/companies/{companyId}/archive", path: func(w *mworld) string { return C(w) + "/archive" }, body: noBodyFn, want: adminRoute(boardOnly(c200))},
		{pattern: "POST /api/companies/{companyId}/unarchive", path: func(w *mworld) string { return C(w) + "/unarchive" }, body: noBodyFn, want: adminRoute(boardOnly(c200))},
		{pattern: "DELETE /api/companies/{companyId}/gate-tokens/{id}", path: func(w *mworld) string { return C(w) + "/gate-tokens/" + w.spareGateID }, body: noBodyFn, want: adminRoute(boardOnly(c200))},
		// Webhooks (RULES.md W6): the board's and operators' of the company.
		{pattern: "POST /api/companies/{companyId}/webhooks", path: func(w *mworld) string { return C(w) + "/webhooks" }, body: func(*mworld, string) any {
			return map[string]any{"url": "https://example.com/new", "events": []string{"issue.*"}}
		}, want: write(boardOnly(c201))},
		{pattern: "GET /api/companies/{companyId}/webhooks", path: func(w *mworld) string { return C(w) + "/webhooks" }, body: noBodyFn, want: read(boardOnly(c200))},
		{pattern: "GET /api/webhooks/{id}", path: func(w *mworld) string { return "/api/webhooks/" + w.hook }, body: noBodyFn, want: read(boardOnly(c200))},
		{pattern: "PATCH /api/webhooks/{id}", path: func(w *mworld) string { return "/api/webhooks/" + w.hook }, body: func(*mworld, string) any {
			return map[string]any{"enabled": true}
		}, want: write(boardOnly(c200))},
		{pattern: "DELETE /api/webhooks/{id}", path: func(w *mworld) string { return "/api/webhooks/" + w.spareHook }, body: noBodyFn, want: write(boardOnly(c204))},
		{pattern: "GET /api/webhooks/{id}/deliveries", path: func(w *mworld) string { return "/api/webhooks/" + w.hook + "/deliveries" }, body: noBodyFn, want: read(boardOnly(c200))},
		{pattern: "GET /api/companies/{companyId}/attention", path: func(w *mworld) string { return C(w) + "/attention" }, body: noBodyFn, want: read(boardOnly(c200))},
		{pattern: "POST /api/webhook-deliveries/{id}/redeliver", path: func(w *mworld) string { return "/api/webhook-deliveries/" + w.deliveryID + "/redeliver" }, body: empty, want: write(boardOnly("202"))},
	}
	// A gate token may call the gate's check and nothing else: every
	// other route answers it 403 (the public ones aside).
	for k := range rows {
		if rows[k].want[actGate] == "" {
			rows[k].want[actGate] = cForbidden
		}
	}
	return rows
}

// routePatterns returns every pattern registered in routes.go, read from
// its source so that a new route without a matrix row fails the test.
func routePatterns(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("routes.go")
	if err != nil {
		t.Fatalf("read routes.go: %v", err)
	}
	re := regexp.MustCompile(`(?:pattern: |HandleFunc\(|Handle\()"([A-Z]+ /[^"]*)"`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		out = append(out, m[1])
	}
	if len(out) == 0 {
		t.Fatal("no route patterns found in routes.go")
	}
	return out
}

// TestPermissionMatrix sends every endpoint as every actor, each cell on a
// fresh cast, and checks the status (and, for errors, the code).
func TestPermissionMatrix(t *testing.T) {
	b := setup(t)
	rows := matrixRows()
	have := map[string]bool{}
	for _, r := range rows {
		if have[r.pattern] {
			t.Errorf("pattern %q has two matrix rows", r.pattern)
		}
		have[r.pattern] = true
	}
	registered := map[string]bool{}
	for _, p := range routePatterns(t) {
		registered[p] = true
		if !have[p] {
			t.Errorf("route %q has no permission-matrix row: add one with a deliberate expectation per actor", p)
		}
	}
	for _, r := range rows {
		if !registered[r.pattern] {
			t.Errorf("matrix row %q is not a route in routes.go", r.pattern)
		}
	}
	cells := 0
	for _, r := range rows {
		for a := actor(0); a < numActors; a++ {
			w := mworldSetup(b)
			if r.prep != nil {
				r.prep(b, w)
			}
			token, run, agentID := w.credentials(b, a)
			path := r.path(w)
			if r.runInPath {
				if a == actTerminal {
					path = strings.Replace(path, w.ra.ID, w.rt.ID, 1)
				}
				run = "" // the path names the run
			}
			method, _, _ := strings.Cut(r.pattern, " ")
			status, code, body := matrixDo(t, b, method, path, token, run, r.body(w, agentID))
			got := strconv.Itoa(status)
			if status >= 300 {
				got += " " + code
			}
			if got != r.want[a] {
				t.Errorf("%-45s as %-11s: got %s, want %s; body %s", r.pattern, actorNames[a], got, r.want[a], body)
			}
			cells++
		}
	}
	t.Logf("permission matrix: %d endpoints x %d actors = %d cells", len(rows), numActors, cells)
}

// matrixDo sends one request and returns the status, the error code of a
// non-2xx answer (checking that the body is a JSON error with error, code
// and details) and the body (truncated). An event stream is not read past
// its status line.
func matrixDo(t *testing.T, b *bundle, method, path, token, run string, body any) (int, string, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		rd = bytes.NewReader(data)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, method, b.ts.URL+path, rd)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	if rd != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		hr.Header.Set("Authorization", "Bearer "+token)
	}
	if run != "" {
		hr.Header.Set(RunIDHeader, run)
	}
	res, err := b.hc.Do(hr)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		return res.StatusCode, "", ""
	}
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	short := string(data)
	if len(short) > 300 {
		short = short[:300] + "..."
	}
	if res.StatusCode < 300 {
		return res.StatusCode, "", short
	}
	var e struct {
		Error   *string         `json:"error"`
		Code    *string         `json:"code"`
		Details *map[string]any `json:"details"`
	}
	if err := json.Unmarshal(data, &e); err != nil || e.Error == nil || e.Code == nil || e.Details == nil || *e.Details == nil {
		t.Errorf("%s %s: status %d with a body that is not {error, code, details}: %s", method, path, res.StatusCode, short)
		return res.StatusCode, "?", short
	}
	return res.StatusCode, *e.Code, short
}
