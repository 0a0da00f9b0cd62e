#!/bin/sh
# A Paperclip-style agent in shell: it knows only Paperclip's protocol, so
# the same script runs under Paperclip's process adapter and under clasp's
# scheduler unchanged. It reads only the PAPERCLIP_* variables
# (PAPERCLIP_API_URL, PAPERCLIP_API_KEY, PAPERCLIP_RUN_ID,
# PAPERCLIP_AGENT_ID, PAPERCLIP_COMPANY_ID, PAPERCLIP_TASK_ID), calls only
# Paperclip's paths, and names its run in X-Paperclip-Run-Id. Needs curl,
# jq and sha256sum.
#
# Usage (as the process adapter's command): /bin/sh agent.sh [work-seconds]
#
# One heartbeat: find the task (PAPERCLIP_TASK_ID, else the inbox, else an
# unassigned todo issue of the company), check it out (a 409 means another
# run has it: never retried, the heartbeat just ends), read its heartbeat
# context, "work" (the SHA-256 of the file the description names, after
# work-seconds), then write the result comment and status done in one
# PATCH. Exit 0: the run succeeded. A file it cannot read sets the issue
# blocked with the reason instead (exit 1: the run failed).
set -eu

: "${PAPERCLIP_API_URL:?PAPERCLIP_API_URL is not set}"
: "${PAPERCLIP_API_KEY:?PAPERCLIP_API_KEY is not set}"
: "${PAPERCLIP_RUN_ID:?PAPERCLIP_RUN_ID is not set}"
: "${PAPERCLIP_AGENT_ID:?PAPERCLIP_AGENT_ID is not set}"
: "${PAPERCLIP_COMPANY_ID:?PAPERCLIP_COMPANY_ID is not set}"
work_seconds=${1:-0}

# api METHOD PATH [JSON]: one request of this run. Prints the body and
# sets $status; returns 1 on a non-2xx answer (the error body on stderr).
api() {
	out=$(mktemp)
	status=$(curl -sS -o "$out" -w '%{http_code}' -X "$1" \
		-H "Authorization: Bearer $PAPERCLIP_API_KEY" \
		-H "X-Paperclip-Run-Id: $PAPERCLIP_RUN_ID" \
		-H 'Content-Type: application/json' \
		${3:+--data "$3"} "$PAPERCLIP_API_URL/api$2")
	body=$(cat "$out")
	rm -f "$out"
	case "$status" in
	2??) printf '%s' "$body" ;;
	*) echo "agent: $1 $2: HTTP $status: $body" >&2; return 1 ;;
	esac
}

# The task: the wake's, else the first of my inbox, else an unassigned
# todo issue (a random one of the first page, so that agents spread out).
task=${PAPERCLIP_TASK_ID:-}
if [ -z "$task" ]; then
	task=$(api GET /agents/me/inbox-lite | jq -r '[.[] | select(.status == "todo" or .status == "in_progress")][0].id // empty')
fi
if [ -z "$task" ]; then
	task=$(api GET "/companies/$PAPERCLIP_COMPANY_ID/issues?status=todo&limit=50" |
		jq -r --argjson r "$(od -An -N2 -tu2 /dev/urandom)" '[.[] | select(.assigneeAgentId == null)] | if length == 0 then empty else .[$r % length].id end')
fi
if [ -z "$task" ]; then
	echo "agent: nothing to do"
	exit 0
fi

body=$(jq -nc --arg a "$PAPERCLIP_AGENT_ID" '{agentId: $a, expectedStatuses: ["todo", "backlog", "blocked"]}')
if ! issue=$(api POST "/issues/$task/checkout" "$body"); then
	if [ "$status" = 409 ]; then
		echo "agent: $task is another run's; not retrying a 409"
		exit 0
	fi
	exit 1
fi
ident=$(printf '%s' "$issue" | jq -r .identifier)

# What a Paperclip agent reads first: the issue, its recent comments, and
# what it may do next.
ctx=$(api GET "/issues/$task/heartbeat-context")
file=$(printf '%s' "$ctx" | jq -r .issue.description)
echo "agent: working on $ident ($(printf '%s' "$ctx" | jq -r '.comments | length') comments so far)"

sleep "$work_seconds"
if ! sum=$(sha256sum <"$file" 2>/dev/null); then
	# Work that failed never marks the issue done: it becomes blocked with
	# the reason (the same write releases the lock), and the run fails.
	body=$(jq -nc --arg c "work failed: cannot read $file" '{status: "blocked", comment: $c}')
	api PATCH "/issues/$task" "$body" | jq -r '"agent: \(.identifier) is \(.status): work failed"'
	exit 1
fi

body=$(jq -nc --arg c "sha256 ${sum%% *}" '{status: "done", comment: $c}')
api PATCH "/issues/$task" "$body" | jq -r '"agent: \(.identifier) is \(.status)"'
