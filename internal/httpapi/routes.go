package httpapi

// routes registers every endpoint of the API (docs/api.md), with who may call it
// and how it treats runs. Agents of one company get 403 on another
// company's routes and 404 on its resources by id (RULES.md, Actors and credentials).
func (s *Server) routes() {
	s.mux.HandleFunc("GET /healthz", s.handleHealthz)
	s.mux.HandleFunc("GET /readyz", s.handleReadyz)
	s.mux.Handle("GET /metrics", s.metricsHandler())
	s.mux.HandleFunc("GET /api/openapi.json", s.handleOpenAPI)

	// Operators: who acts as the board, its tokens and board sessions
	// (RULES.md, Actors and credentials).
	s.handle(endpoint{pattern: "GET /api/operators/me", access: boardOnly, serve: noBody(s.operatorMe)})
	s.handle(endpoint{pattern: "POST /api/operators/tokens", access: adminOnly, serve: withBody(s.operatorTokenCreate)})
	s.handle(endpoint{pattern: "GET /api/operators/tokens", access: adminOnly, serve: noBody(s.operatorTokenList)})
	s.handle(endpoint{pattern: "DELETE /api/operators/tokens/{id}", access: adminOnly, serve: noBody(s.operatorTokenRevoke)})
	s.handle(endpoint{pattern: "POST /api/operators/tokens/{id}/rotate", access: adminOnly, serve: withBody(s.operatorTokenRotate)})
	s.handle(endpoint{pattern: "POST /api/sessions", access: boardOnly, anyRole: true, serve: withBody(s.sessionCreate)})
	s.handle(endpoint{pattern: "DELETE /api/sessions/current", access: boardOnly, anyRole: true, serve: noBody(s.sessionDelete)})

	// Tenants and agents: the board's; creating a company is an unscoped admin's.
	s.handle(endpoint{pattern: "POST /api/companies", access: adminOnly, unscoped: true, serve: withBody(s.companyCreate)})
	s.handle(endpoint{pattern: "GET /api/companies", access: boardOnly, serve: noBody(s.companyList)})
	s.handle(endpoint{pattern: "GET /api/companies/{companyId}", access: boardOnly, serve: noBody(s.companyGet)})
	s.handle(endpoint{pattern: "PATCH /api/companies/{companyId}", access: adminOnly, serve: withBody(s.companyUpdate)})
	// Archiving hides a company from the list (and the board's picker); an admin's.
	s.handle(endpoint{pattern: "POST /api/companies/{companyId}/archive", access: adminOnly, serve: noBody(s.companyArchive(true))})
	s.handle(endpoint{pattern: "POST /api/companies/{companyId}/unarchive", access: adminOnly, serve: noBody(s.companyArchive(false))})
	s.handle(endpoint{pattern: "POST /api/companies/{companyId}/agents", access: boardOnly, serve: withBody(s.agentCreate)})
	// Agents read their own company's agents, without keys or adapters (RULES.md, Actors and credentials).
	s.handle(endpoint{pattern: "GET /api/companies/{companyId}/agents", access: anyone, serve: noBody(s.agentList)})
	s.handle(endpoint{pattern: "GET /api/agents/{id}", access: anyone, serve: noBody(s.agentGet)})
	s.handle(endpoint{pattern: "PATCH /api/agents/{id}", access: boardOnly, serve: withBody(s.agentUpdate)})
	s.handle(endpoint{pattern: "POST /api/agents/{id}/keys", access: boardOnly, serve: withBody(s.agentKeyCreate)})
	s.handle(endpoint{pattern: "GET /api/agents/{id}/keys", access: boardOnly, serve: noBody(s.agentKeyList)})
	s.handle(endpoint{pattern: "DELETE /api/agents/{id}/keys/{keyId}", access: boardOnly, serve: noBody(s.agentKeyRevoke)})
	// Wake a server-managed agent (the board, or the agent itself).
	s.handle(endpoint{pattern: "POST /api/agents/{id}/wakeup", access: anyone, serve: withBody(s.agentWakeup)})

	// The calling agent.
	s.handle(endpoint{pattern: "GET /api/agents/me", access: agentOnly, serve: noBody(s.agentMe)})
	s.handle(endpoint{pattern: "GET /api/agents/me/inbox-lite", access: agentOnly, serve: noBody(s.agentInbox)})
	s.handle(endpoint{pattern: "POST /api/agents/me/runs", access: agentOnly, idempotent: true, serve: withBody(s.runOpen)})
	s.handle(endpoint{pattern: "POST /api/agents/me/claim", access: agentOnly, run: runRequired, tokenOnly: true, serve: withBody(s.issueClaim)})

	// Runs.
	// A run's heartbeat and finish are owner-only writes: with
	// --require-run-token an agent must use the run's token (RULES.md, Actors and credentials).
	s.handle(endpoint{pattern: "POST /api/runs/{id}/heartbeat", access: agentOnly, run: runInPath, tokenOnly: true, forceTouch: true, serve: withBody(s.runHeartbeat)})
	s.handle(endpoint{pattern: "POST /api/runs/{id}/finish", access: anyone, run: runInPath, tokenOnly: true, serve: withBody(s.runFinish)})
	s.handle(endpoint{pattern: "GET /api/runs/{id}", access: anyone, serve: noBody(s.runGet)})
	s.handle(endpoint{pattern: "GET /api/companies/{companyId}/runs", access: anyone, serve: noBody(s.runList)})
	// A server-managed run's output (board, or the run's agent) and its cancel (board).
	s.handle(endpoint{pattern: "GET /api/runs/{id}/log", access: anyone, serve: noBody(s.runLog)})
	s.handle(endpoint{pattern: "POST /api/runs/{id}/cancel", access: boardOnly, serve: withBody(s.runCancel)})

	// Issues and their locks.
	s.handle(endpoint{pattern: "POST /api/companies/{companyId}/issues", access: anyone, idempotent: true, serve: withBody(s.issueCreate)})
	s.handle(endpoint{pattern: "GET /api/companies/{companyId}/issues", access: anyone, serve: noBody(s.issueList)})
	s.handle(endpoint{pattern: "GET /api/issues/{id}", access: anyone, serve: noBody(s.issueGet)})
	s.handle(endpoint{pattern: "PATCH /api/issues/{id}", access: anyone, run: runRequired, tokenOnly: true, idempotent: true, serve: withBody(s.issueUpdate)})
	s.handle(endpoint{pattern: "POST /api/issues/{id}/checkout", access: anyone, run: runRequired, tokenOnly: true, serve: withBody(s.issueCheckout)})
	s.handle(endpoint{pattern: "POST /api/issues/{id}/release", access: anyone, run: runRequired, tokenOnly: true, serve: withBody(s.issueRelease)})
	s.handle(endpoint{pattern: "POST /api/issues/{id}/admin/force-release", access: boardOnly, serve: withBody(s.issueForceRelease)})

	// Comments and the audit trail.
	s.handle(endpoint{pattern: "GET /api/issues/{id}/comments", access: anyone, serve: noBody(s.commentList)})
	s.handle(endpoint{pattern: "POST /api/issues/{id}/comments", access: anyone, idempotent: true, serve: withBody(s.commentCreate)})
	s.handle(endpoint{pattern: "GET /api/issues/{id}/comments/{commentId}", access: anyone, serve: noBody(s.commentGet)})
	s.handle(endpoint{pattern: "GET /api/issues/{id}/heartbeat-context", access: anyone, serve: noBody(s.heartbeatContext)})
	s.handle(endpoint{pattern: "GET /api/issues/{id}/activity", access: anyone, serve: noBody(s.issueActivity)})
	s.handle(endpoint{pattern: "GET /api/companies/{companyId}/activity", access: anyone, serve: noBody(s.companyActivity)})
	s.handle(endpoint{pattern: "GET /api/companies/{companyId}/events", access: anyone, serve: noBody(s.companyEvents)})

	// The git gate (RULES.md, The git gate): its check takes a gate token
	// alone; an admin of the company makes and revokes those.
	s.handle(endpoint{pattern: "POST /api/gate/check", access: gateOnly, serve: withBody(s.gateCheck)})
	s.handle(endpoint{pattern: "POST /api/companies/{companyId}/gate-tokens", access: adminOnly, serve: withBody(s.gateTokenCreate)})
	s.handle(endpoint{pattern: "GET /api/companies/{companyId}/gate-tokens", access: adminOnly, serve: noBody(s.gateTokenList)})
	s.handle(endpoint{pattern: "DELETE /api/companies/{companyId}/gate-tokens/{id}", access: adminOnly, serve: noBody(s.gateTokenRevoke)})

	// Webhooks (RULES.md, Webhooks): subscriptions and their delivery log,
	// the board's and operators'.
	s.handle(endpoint{pattern: "POST /api/companies/{companyId}/webhooks", access: boardOnly, serve: withBody(s.webhookCreate)})
	s.handle(endpoint{pattern: "GET /api/companies/{companyId}/webhooks", access: boardOnly, serve: noBody(s.webhookList)})
	s.handle(endpoint{pattern: "GET /api/webhooks/{id}", access: boardOnly, serve: noBody(s.webhookGet)})
	s.handle(endpoint{pattern: "PATCH /api/webhooks/{id}", access: boardOnly, serve: withBody(s.webhookUpdate)})
	s.handle(endpoint{pattern: "DELETE /api/webhooks/{id}", access: boardOnly, serve: noBody(s.webhookDelete)})
	s.handle(endpoint{pattern: "GET /api/webhooks/{id}/deliveries", access: boardOnly, serve: noBody(s.webhookDeliveries)})
	s.handle(endpoint{pattern: "POST /api/webhook-deliveries/{id}/redeliver", access: boardOnly, serve: withBody(s.webhookRedeliver)})
	// Escalation (RULES.md E5): the issues that need a person.
	s.handle(endpoint{pattern: "GET /api/companies/{companyId}/attention", access: boardOnly, serve: noBody(s.attentionList)})
}
