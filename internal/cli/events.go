package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// newEventsCmd is `clasp events`: follow a company's live event stream.
func (a *app) newEventsCmd() *cobra.Command {
	var company, actions string
	var after int64
	var count int
	cmd := &cobra.Command{
		Use:   "events [--company COMPANY_ID]",
		Short: "Follow a company's live events (checkouts, releases, adoptions, sweeps, runs)",
		Long: `Follow GET /api/companies/{id}/events, a Server-Sent Events stream of the
company's activity rows as they are written, on whichever replica wrote them.
One line per event (or one JSON object per line with --json). The stream
reconnects by itself after a dropped connection and resumes after the last
event it printed. By default it starts with events written from now on;
--after 0 replays the whole history first. Stop it with Ctrl-C, or let
--count end it after that many events.`,
		Example: `  clasp events --company <company-id>
  clasp events --action issue.checked_out,issue.checkout_lock_adopted --json
  clasp events --after 0 --count 10`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c := a.client()
			cid, err := a.companyID(ctx, c, company)
			if err != nil {
				return err
			}
			opt := client.EventsOptions{AfterID: after}
			if actions != "" {
				opt.Actions = strings.Split(actions, ",")
			}
			n := 0
			errEnough := errors.New("enough events")
			err = c.Events(ctx, cid, opt, func(ev *clasp.Activity) error {
				if a.jsonOut {
					b, err := json.Marshal(ev)
					if err != nil {
						return err
					}
					fmt.Fprintln(a.stdout, string(b))
				} else {
					details := strings.TrimSpace(string(ev.Details))
					if details == "{}" || details == "null" {
						details = ""
					}
					fmt.Fprintf(a.stdout, "%d  %s  %-28s %s %s  run=%s  %s\n", ev.ID, fmtTime(ev.CreatedAt), ev.Action,
						ev.EntityType, ev.EntityID, optStr(ev.RunID), details)
				}
				n++
				if count > 0 && n >= count {
					return errEnough
				}
				return nil
			})
			if errors.Is(err, errEnough) || (err != nil && ctx.Err() != nil) {
				return nil
			}
			return err
		},
	}
	a.addClientFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&company, "company", "", "company id (default $"+EnvCompanyID+", or the calling agent's)")
	f.StringVar(&actions, "action", "", "only these actions, comma-separated")
	f.Int64Var(&after, "after", -1, "resume after this activity id (0 replays everything; default: from now on)")
	f.IntVar(&count, "count", 0, "exit after this many events (0: follow until interrupted)")
	return cmd
}
