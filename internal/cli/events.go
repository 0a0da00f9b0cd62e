package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// maxEventCompanies is how many companies `clasp events` follows at once
// without --company: the event streams one credential may hold open by
// default (httpapi.DefaultStreamsPerAgent).
const (
	maxEventCompanies     = 16
	maxEventCompaniesText = "16"
)

// eventCompany is a company `clasp events` follows, with the label its
// lines start with when it follows several.
type eventCompany struct{ id, label string }

// eventCompanies returns the companies `clasp events` follows: the one of
// --company or $CLASP_COMPANY_ID; else an agent's own; else every company
// the operator credential sees (at most maxEventCompanies, else a usage
// error listing them).
func (a *app) eventCompanies(ctx context.Context, c *client.Client, flag string) ([]eventCompany, error) {
	if flag != "" || a.getenv(EnvCompanyID) != "" || isAgentToken(a.bearer()) {
		id, err := a.companyID(ctx, c, flag)
		if err != nil {
			return nil, err
		}
		return []eventCompany{{id: id}}, nil
	}
	cos, err := a.visibleCompanies(ctx, c)
	if err != nil {
		return nil, err
	}
	switch {
	case len(cos) == 0:
		return nil, usageErr(errors.New("there is no company to follow yet (clasp company create NAME)"))
	case len(cos) > maxEventCompanies:
		return nil, usageErr(fmt.Errorf("you see %d companies, more than the %d event streams one credential may hold open: pass --company (an id, issue prefix or name) to follow one; the companies: %s", len(cos), maxEventCompanies, describeCompanies(cos)))
	}
	out := make([]eventCompany, len(cos))
	for i, co := range cos {
		out[i] = eventCompany{id: co.ID, label: co.IssuePrefix}
	}
	return out, nil
}

// newEventsCmd is `clasp events`: follow a company's live event stream.
func (a *app) newEventsCmd() *cobra.Command {
	var company, actions string
	var after int64
	var count int
	cmd := &cobra.Command{
		Use:   "events [--company COMPANY]",
		Short: "Follow a company's live events (checkouts, releases, adoptions, sweeps, runs)",
		Long: `Follow GET /api/companies/{id}/events, a Server-Sent Events stream of the
company's activity rows as they are written, on whichever replica wrote them.
One line per event (or one JSON object per line with --json): its id, time,
actor and action, what it is about and the run, agents by name and issues by
identifier, then its details. The stream reconnects by itself after a dropped
connection and resumes after the last event it printed (or, before any, where
it started), saying on stderr when it broke and when it is back. By default it starts
with events written from now on; --after 0 replays the whole history first.
Stop it with Ctrl-C, or let --count end it after that many events.

Without --company (or $` + EnvCompanyID + `), an agent's credential follows its own
company, and an operator token (the board token is one) every company it sees,
one stream each, merged: each line then starts with the company's issue prefix
(--json: each event carries its companyId). One credential may hold at most ` + maxEventCompaniesText + `
streams open; past that many companies, pass --company.`,
		Example: `  clasp events
  clasp events --company ACME
  clasp events --action issue.checked_out,issue.checkout_lock_adopted --json
  clasp events --after 0 --count 10`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			c := a.client()
			cos, err := a.eventCompanies(ctx, c, company)
			if err != nil {
				return err
			}
			opt := client.EventsOptions{AfterID: after}
			if actions != "" {
				opt.Actions = strings.Split(actions, ",")
			}
			var mu sync.Mutex
			n := 0
			// Names are learnt as events name them: each company's agents
			// once, again (at most every agentRefetchEvery) for an agent
			// created since; issues from the events' details or one
			// look-up each.
			var nm *names
			if !a.jsonOut {
				nm = a.names(agentRefetchEvery)
			}
			errEnough := errors.New("enough events")
			emitEvent := func(co eventCompany, ev *clasp.Activity) error {
				mu.Lock()
				defer mu.Unlock()
				if count > 0 && n >= count {
					return errEnough
				}
				if a.jsonOut {
					b, err := json.Marshal(ev)
					if err != nil {
						return err
					}
					fmt.Fprintln(a.stdout, string(b))
				} else {
					nm.learnActivity(ctx, []*clasp.Activity{ev})
					lead := ""
					if len(cos) > 1 {
						lead = co.label + "  "
					}
					fmt.Fprintf(a.stdout, "%s%d  %s  %-16s  %-28s  %s  run=%s  %s\n", lead, ev.ID, fmtTime(ev.CreatedAt), cell(nm.actor(ev)), cell(ev.Action),
						cell(nm.entity(ev)), cell(optStr(ev.RunID)), cell(activityDetails(ev)))
				}
				n++
				if count > 0 && n >= count {
					return errEnough
				}
				return nil
			}
			// One stream per company, merged in the order events arrive;
			// the first to end with an error (or --count) ends the others.
			errs := make(chan error, len(cos))
			var wg sync.WaitGroup
			for _, co := range cos {
				wg.Go(func() {
					// A person following the stream is told when it is down
					// (once per outage) and when it is back.
					lead := "clasp events: "
					if len(cos) > 1 {
						lead += co.label + ": "
					}
					lost := false
					o := opt
					o.OnReconnect = func(err error, _ time.Duration) {
						if !lost && ctx.Err() == nil {
							lost = true
							mu.Lock()
							fmt.Fprintf(a.stderr, "%sthe stream broke (%v); reconnecting until the server answers (Ctrl-C stops)\n", lead, cell(err.Error()))
							mu.Unlock()
						}
					}
					o.OnConnect = func() {
						if lost {
							lost = false
							mu.Lock()
							fmt.Fprintf(a.stderr, "%sreconnected; resuming after the last event, none skipped\n", lead)
							mu.Unlock()
						}
					}
					err := c.Events(ctx, co.id, o, func(ev *clasp.Activity) error { return emitEvent(co, ev) })
					cancel()
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			var first error
			for err := range errs {
				if err != nil && !errors.Is(err, errEnough) && !errors.Is(err, context.Canceled) && first == nil {
					first = err
				}
			}
			if err := cmd.Context().Err(); err != nil {
				return err // stopped by its user: exit 130, nothing printed
			}
			return first
		},
	}
	a.addClientFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&company, "company", "", "company: its id, issue prefix or name (default $"+EnvCompanyID+", or the calling agent's)")
	f.StringVar(&actions, "action", "", "only these actions, comma-separated")
	f.Int64Var(&after, "after", -1, "resume after this activity id (0 replays everything; default: from now on)")
	f.IntVar(&count, "count", 0, "exit after this many events (0: follow until interrupted)")
	return cmd
}
