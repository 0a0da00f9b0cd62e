// Command goagent is a clasp agent written with the client package (issue
// 4): it works one issue per run, then exits.
//
// Run by the server as a process adapter:
//
//	go build -o /usr/local/bin/clasp-goagent ./examples/goagent
//	clasp agent set-adapter <agent-id> --command /usr/local/bin/clasp-goagent
//
// The server sets CLASP_API_URL, CLASP_API_KEY (a key valid for this run
// only), CLASP_RUN_ID, CLASP_AGENT_ID and, when the wake named one,
// CLASP_ISSUE_ID (the PAPERCLIP_* names work too, and PAPERCLIP_TASK_ID);
// the retry of a run whose process was lost gets the issue it held. One
// run checks out that issue first (or claims the most urgent free one),
// works on it, then
// comments and marks it done in one PATCH, which also releases the lock.
// Exit 0 makes the run succeeded; exit 1 failed.
package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

func main() {
	// The server stops a run with SIGTERM (cancel, timeout): stop the work.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "goagent:", err)
		os.Exit(1)
	}
}

// env returns CLASP_<name>, else PAPERCLIP_<name>.
func env(getenv func(string) string, name string) string {
	return cmp.Or(getenv("CLASP_"+name), getenv("PAPERCLIP_"+name))
}

func run(ctx context.Context, getenv func(string) string) error {
	url, key, runID, agentID := env(getenv, "API_URL"), env(getenv, "API_KEY"), env(getenv, "RUN_ID"), env(getenv, "AGENT_ID")
	if url == "" || key == "" || runID == "" || agentID == "" {
		return fmt.Errorf("CLASP_API_URL, CLASP_API_KEY, CLASP_RUN_ID and CLASP_AGENT_ID must be set (the server sets them)")
	}
	c := client.New(url, client.WithToken(key), client.WithRunID(runID), client.WithUserAgent("clasp-goagent"))

	var issue *clasp.Issue
	var err error
	if ref := cmp.Or(env(getenv, "ISSUE_ID"), getenv("PAPERCLIP_TASK_ID")); ref != "" {
		// The wake named an issue (or this is the retry of a run lost
		// while it held one): this run holds its execution lock.
		issue, err = c.IssueCheckout(ctx, ref, client.CheckoutRequest{AgentID: agentID,
			ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo, clasp.IssueInProgress, clasp.IssueBlocked, clasp.IssueBacklog}})
	} else {
		issue, err = c.Claim(ctx, client.ClaimRequest{})
	}
	if err != nil {
		return fmt.Errorf("take an issue: %w", err)
	}
	if issue == nil {
		fmt.Println("goagent: no issue to work on")
		return nil
	}
	fmt.Printf("goagent: working on %s: %s\n", issue.Identifier, issue.Title)

	result, err := work(ctx, issue)
	if err != nil {
		return fmt.Errorf("work on %s: %w", issue.Identifier, err)
	}
	done := clasp.IssueDone
	upd, err := c.IssueUpdate(ctx, issue.ID, client.IssueUpdateRequest{Status: &done, Comment: &result})
	if err != nil {
		return fmt.Errorf("finish %s: %w", issue.Identifier, err)
	}
	fmt.Printf("goagent: %s is %s\n", upd.Identifier, upd.Status)
	return nil
}

// work is where a real agent does the issue's work; it returns the comment
// to leave on the issue.
func work(ctx context.Context, issue *clasp.Issue) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return fmt.Sprintf("Done by the Go agent: %q.", issue.Title), nil
}
