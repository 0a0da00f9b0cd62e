// Command goscenarios is the Go client's side of the shared client
// scenarios (package sdktest runs it as a real process, as it runs
// sdk/python/tests/scenarios.py and sdk/typescript/test/scenarios.mjs):
// `goscenarios <scenario>` with CLASP_URL, CLASP_API_KEY and the scenario's
// SCN_* variables; it prints what it saw as JSON on stdout and exits 1 when
// the client did not behave as the scenario says. It runs the scenarios
// whose behaviour the Go client has (runs, checkout, comments with an
// Idempotency-Key, conflicts, claims, the event stream); the others are
// the Python and TypeScript clients' helpers (a run as a scope, the work
// loop, waiting out 429s).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: goscenarios checkout|idempotent|lost_answer|conflict|claim_until_empty|events")
		os.Exit(2)
	}
	c := client.New(os.Getenv("CLASP_URL"), client.WithToken(os.Getenv("CLASP_API_KEY")))
	if err := run(context.Background(), c, os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func out(v any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

// withRun opens a run, calls f with a client acting in it (its run token)
// and finishes it succeeded.
func withRun(ctx context.Context, c *client.Client, f func(rc *client.Client, run *clasp.Run) error) error {
	run, err := c.RunOpen(client.WithIdempotencyKey(ctx, client.NewIdempotencyKey()), client.RunOpenRequest{})
	if err != nil {
		return err
	}
	rc := c.WithToken(run.RunToken)
	if err := f(rc, run); err != nil {
		return err
	}
	_, err = rc.RunFinish(ctx, run.ID, client.RunFinishRequest{Status: clasp.RunSucceeded})
	return err
}

func run(ctx context.Context, c *client.Client, scenario string) error {
	issue := os.Getenv("SCN_ISSUE")
	todo := []clasp.IssueStatus{clasp.IssueTodo}
	switch scenario {
	case "checkout":
		return withRun(ctx, c, func(rc *client.Client, run *clasp.Run) error {
			iss, err := rc.IssueCheckout(ctx, issue, client.CheckoutRequest{AgentID: run.AgentID, ExpectedStatuses: todo})
			if err != nil {
				return err
			}
			out(map[string]any{"run": run.ID, "identifier": iss.Identifier, "status": iss.Status, "epoch": iss.CheckoutEpoch, "checkoutRunId": iss.CheckoutRunID})
			return nil
		})
	case "idempotent":
		return withRun(ctx, c, func(rc *client.Client, run *clasp.Run) error {
			ictx := client.WithIdempotencyKey(ctx, "scenario-"+os.Getenv("SCN_NONCE"))
			first, err := rc.CommentCreate(ictx, issue, client.CommentCreateRequest{Body: "once"})
			if err != nil {
				return err
			}
			again, err := rc.CommentCreate(ictx, issue, client.CommentCreateRequest{Body: "once"})
			if err != nil {
				return err
			}
			out(map[string]any{"run": run.ID, "first": first.ID, "again": again.ID})
			return nil
		})
	case "lost_answer":
		return withRun(ctx, c, func(rc *client.Client, run *clasp.Run) error {
			ictx := client.WithIdempotencyKey(ctx, client.NewIdempotencyKey())
			cm, err := rc.CommentCreate(ictx, issue, client.CommentCreateRequest{Body: "lost once"})
			if err != nil {
				return err
			}
			out(map[string]any{"run": run.ID, "comment": cm.ID})
			return nil
		})
	case "conflict":
		return withRun(ctx, c, func(rc *client.Client, run *clasp.Run) error {
			_, err := rc.IssueCheckout(ctx, issue, client.CheckoutRequest{AgentID: run.AgentID, ExpectedStatuses: todo})
			e := clasp.AsError(err)
			if e == nil || !client.IsConflict(err) {
				return fmt.Errorf("checkout of an issue another live run holds answered %v, want a conflict", err)
			}
			out(map[string]any{"run": run.ID, "status": e.Status, "code": e.Code, "holderRunId": e.Details["checkoutRunId"],
				"holderAgentId": e.Details["assigneeAgentId"], "reason": e.Details["reason"]})
			return nil
		})
	case "claim_until_empty":
		return withRun(ctx, c, func(rc *client.Client, run *clasp.Run) error {
			claimed := []string{}
			for {
				iss, err := rc.Claim(ctx, client.ClaimRequest{Scope: "any"})
				if err != nil {
					return err
				}
				if iss == nil {
					break
				}
				if claimed = append(claimed, iss.Identifier); len(claimed) > 50 {
					return errors.New("claim never answered none")
				}
			}
			out(map[string]any{"run": run.ID, "claimed": claimed})
			return nil
		})
	case "events":
		stopAfter, _ := strconv.Atoi(os.Getenv("SCN_STOP_AFTER"))
		after, err := strconv.ParseInt(os.Getenv("SCN_LAST_EVENT_ID"), 10, 64)
		if err != nil {
			after = -1
		}
		me, err := c.Me(ctx)
		if err != nil {
			return err
		}
		ectx, stop := context.WithCancel(ctx)
		defer stop()
		n := 0
		err = c.Events(ectx, me.CompanyID, client.EventsOptions{AfterID: after, MaxBackoff: 500e6}, func(a *clasp.Activity) error {
			out(map[string]any{"id": a.ID, "action": a.Action, "entityId": a.EntityID})
			if n++; n >= stopAfter {
				stop()
			}
			return nil
		})
		if n >= stopAfter {
			return nil
		}
		return err
	}
	return fmt.Errorf("the Go client has no scenario %q", scenario)
}
