#!/bin/sh
# A clasp agent in shell: works one issue per run, then exits.
#
# Run by the server as a process adapter:
#   clasp agent set-adapter <agent-id> --command /bin/sh --arg "$PWD/examples/shell-agent/agent.sh"
# The server sets CLASP_API_URL, CLASP_API_KEY (a key valid for this run
# only), CLASP_RUN_ID, CLASP_AGENT_ID and, when the wake named one,
# CLASP_ISSUE_ID (PAPERCLIP_TASK_ID too; the retry of a run whose process
# was lost gets the issue that run held). Needs curl and jq.
#
# One run: check out the wake's issue (or claim the most urgent free one),
# "work" on it, then comment and mark it done in one PATCH, which also
# releases the lock. Exit 0: the run succeeded. Any failure exits non-zero
# and the server records the run as failed.
set -eu

: "${CLASP_API_URL:?CLASP_API_URL is not set}"
: "${CLASP_API_KEY:?CLASP_API_KEY is not set}"
: "${CLASP_RUN_ID:?CLASP_RUN_ID is not set}"
: "${CLASP_AGENT_ID:?CLASP_AGENT_ID is not set}"

# api METHOD PATH [JSON]: one request in this run; prints the body, fails
# on a non-2xx answer (after printing the error body to stderr). The key
# reaches curl as a config file on its stdin (printf is a shell builtin),
# never in its argv, which any local user can read in ps.
api() {
	out=$(mktemp)
	status=$(printf 'header = "Authorization: Bearer %s"\n' "$CLASP_API_KEY" |
		curl -sS --config - -o "$out" -w '%{http_code}' -X "$1" \
		-H "X-Clasp-Run-Id: $CLASP_RUN_ID" \
		-H 'Content-Type: application/json' \
		${3:+--data "$3"} "$CLASP_API_URL$2")
	body=$(cat "$out")
	rm -f "$out"
	case "$status" in
	2??) printf '%s' "$body" ;;
	*) echo "agent: $1 $2: HTTP $status: $body" >&2; return 1 ;;
	esac
}

CLASP_ISSUE_ID=${CLASP_ISSUE_ID:-${PAPERCLIP_TASK_ID:-}}
if [ -n "$CLASP_ISSUE_ID" ]; then
	# The wake named an issue (or this is the retry of a run lost while it
	# held one): this run holds its execution lock, so take it over first.
	body=$(jq -nc --arg a "$CLASP_AGENT_ID" '{agentId: $a, expectedStatuses: ["todo", "in_progress", "blocked", "backlog"]}')
	issue=$(api POST "/api/issues/$CLASP_ISSUE_ID/checkout" "$body")
else
	issue=$(api POST /api/agents/me/claim '{}')
	if [ -z "$issue" ]; then
		echo "agent: no issue to work on"
		exit 0
	fi
fi
id=$(printf '%s' "$issue" | jq -r .id)
ident=$(printf '%s' "$issue" | jq -r .identifier)
title=$(printf '%s' "$issue" | jq -r .title)
echo "agent: working on $ident: $title"

# The work itself goes here.
result="Done by the shell agent in run $CLASP_RUN_ID."

body=$(jq -nc --arg c "$result" '{status: "done", comment: $c}')
done_issue=$(api PATCH "/api/issues/$id" "$body")
printf '%s' "$done_issue" | jq -r '"agent: \(.identifier) is \(.status)"'
