package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// Webhooks (RULES.md, Webhooks): `clasp webhook` manages a company's
// subscriptions and reads their delivery log; the board's and operators'.

func (a *app) newWebhookCmd() *cobra.Command {
	g := a.newGroup("webhook", "Tell other systems what happens: signed webhook deliveries",
		`A webhook subscription POSTs a company's activity (issue.*, run.*, agent.*,
issue.escalated, ...) to a URL as JSON, each delivery signed with the
subscription's secret:

  Clasp-Event: issue.escalated
  Clasp-Delivery: <id, the same at every attempt: drop duplicates by it>
  Clasp-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">

Each delivery is written in the transaction of the change it reports, so a
crash never loses one; it is retried with exponential backoff for 24 hours
until the receiver answers 2xx, in order per issue; a subscription whose
delivery was given up shows as failing. Format slack posts {"text": ...},
what a Slack incoming webhook takes. Targets on loopback, private and
link-local addresses are refused unless the server runs with
--webhook-allow-private. See docs/webhooks.md for verifying signatures.`,
		`  clasp webhook create --company ACME --url https://hooks.example.com/clasp --events 'issue.*,run.finished'
  clasp webhook list --company ACME
  clasp webhook deliveries <webhook-id>`)
	g.AddCommand(a.newWebhookCreateCmd(), a.newWebhookListCmd(), a.newWebhookUpdateCmd(), a.newWebhookDeleteCmd(),
		a.newWebhookDeliveriesCmd(), a.newWebhookRedeliverCmd())
	return g
}

// splitEvents reads --events: patterns separated by commas or spaces.
func splitEvents(s string) []string {
	var out []string
	for _, p := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		out = append(out, strings.TrimSpace(p))
	}
	return out
}

func webhookState(w *clasp.Webhook) string {
	switch {
	case !w.Enabled:
		return "disabled"
	case w.Failing:
		return "FAILING since " + optTime(w.FailingSince)
	}
	return "enabled"
}

func (a *app) newWebhookCreateCmd() *cobra.Command {
	var company, url, events, secret, format string
	var disabled bool
	c := &cobra.Command{
		Use:   "create --company COMPANY --url URL --events PATTERNS",
		Short: "Subscribe a URL to a company's activity and print the signing secret once",
		Long: `Subscribe a URL to the activity actions of a company that match --events: exact
actions (issue.escalated, run.finished), prefixes (issue.*, run.*, agent.*) or *
for all. The signing secret is generated unless --secret gives one, and is
printed this once. Needs an operator token of the company (not a viewer's).`,
		Example: `  clasp webhook create --company ACME --url https://hooks.example.com/clasp --events 'issue.*,run.finished'
  clasp webhook create --company ACME --url https://hooks.slack.com/services/T0/B0/XYZ --events issue.escalated --format slack`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ev := splitEvents(events)
			if len(ev) == 0 {
				return usageErr(fmt.Errorf("--events must name at least one action or pattern, such as 'issue.*' or 'issue.escalated'"))
			}
			id, err := a.resolveCompany(cmd.Context(), company, "--company")
			if err != nil {
				return err
			}
			req := client.WebhookCreateRequest{URL: url, Events: ev, Secret: secret, Format: format}
			if disabled {
				req.Enabled = new(bool)
			}
			w, err := a.client().WebhookCreate(cmd.Context(), id, req)
			if err != nil {
				return err
			}
			return a.emit(w, func(out io.Writer) {
				fields(out, "ID", w.ID, "Company", w.CompanyID, "URL", w.URL, "Events", strings.Join(w.Events, ", "),
					"Format", w.Format, "State", webhookState(w))
				fmt.Fprintf(out, "\nSigning secret (shown only this once; store it with the receiver):\n%s\n", w.Secret)
			})
		},
	}
	c.Flags().StringVar(&company, "company", "", "the company whose activity is delivered: its id, issue prefix or name (required)")
	c.Flags().StringVar(&url, "url", "", "the http:// or https:// URL deliveries are POSTed to (required)")
	c.Flags().StringVar(&events, "events", "", "actions or patterns, separated by commas: issue.*, run.finished, issue.escalated, * (required)")
	c.Flags().StringVar(&secret, "secret", "", "the signing secret (16 to 256 characters); generated when not given")
	c.Flags().StringVar(&format, "format", "json", "json (a WebhookEvent) or slack ({\"text\": ...}, for a Slack incoming webhook)")
	c.Flags().BoolVar(&disabled, "disabled", false, "create it disabled: nothing is delivered until it is enabled")
	_ = c.MarkFlagRequired("company")
	_ = c.MarkFlagRequired("url")
	_ = c.MarkFlagRequired("events")
	return c
}

func (a *app) newWebhookListCmd() *cobra.Command {
	var company string
	c := &cobra.Command{
		Use:     "list --company COMPANY",
		Short:   "List a company's webhook subscriptions (never the secrets); failing ones say so",
		Example: `  clasp webhook list --company ACME`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := a.resolveCompany(cmd.Context(), company, "--company")
			if err != nil {
				return err
			}
			ws, err := a.client().WebhookList(cmd.Context(), id)
			if err != nil {
				return err
			}
			return a.emit(ws, func(w io.Writer) {
				t := newTable(w, "ID", "URL", "EVENTS", "FORMAT", "STATE")
				for _, h := range ws {
					t.row(h.ID, h.URL, strings.Join(h.Events, ","), h.Format, webhookState(h))
				}
				t.flush()
			})
		},
	}
	c.Flags().StringVar(&company, "company", "", "the company: its id, issue prefix or name (required)")
	_ = c.MarkFlagRequired("company")
	return c
}

func (a *app) newWebhookUpdateCmd() *cobra.Command {
	var url, events, secret, format string
	var enable, disable bool
	c := &cobra.Command{
		Use:   "update WEBHOOK_ID [--url URL] [--events PATTERNS] [--format json|slack] [--secret S] [--enable|--disable]",
		Short: "Change a webhook subscription",
		Example: `  clasp webhook update <webhook-id> --disable
  clasp webhook update <webhook-id> --events 'issue.escalated,run.finished' --enable`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			if enable && disable {
				return usageErr(fmt.Errorf("--enable and --disable exclude each other"))
			}
			var req client.WebhookUpdateRequest
			if f.Changed("url") {
				req.URL = &url
			}
			if f.Changed("events") {
				if req.Events = splitEvents(events); len(req.Events) == 0 {
					return usageErr(fmt.Errorf("--events must name at least one action or pattern; use --disable to stop deliveries"))
				}
			}
			if f.Changed("format") {
				req.Format = &format
			}
			if f.Changed("secret") {
				req.Secret = &secret
			}
			if enable || disable {
				req.Enabled = &enable
			}
			if req.URL == nil && req.Events == nil && req.Format == nil && req.Secret == nil && req.Enabled == nil {
				return usageErr(fmt.Errorf("nothing to change: give --url, --events, --format, --secret, --enable or --disable"))
			}
			w, err := a.client().WebhookUpdate(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			return a.emit(w, func(out io.Writer) {
				fields(out, "ID", w.ID, "URL", w.URL, "Events", strings.Join(w.Events, ", "), "Format", w.Format, "State", webhookState(w))
			})
		},
	}
	c.Flags().StringVar(&url, "url", "", "a new URL")
	c.Flags().StringVar(&events, "events", "", "new actions or patterns, separated by commas")
	c.Flags().StringVar(&format, "format", "", "json or slack")
	c.Flags().StringVar(&secret, "secret", "", "a new signing secret (16 to 256 characters)")
	c.Flags().BoolVar(&enable, "enable", false, "deliver again")
	c.Flags().BoolVar(&disable, "disable", false, "deliver nothing new until enabled")
	return c
}

func (a *app) newWebhookDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "delete WEBHOOK_ID",
		Short:   "Delete a webhook subscription and its delivery log",
		Long:    `Delete a subscription: its delivery log goes with it, and what was not sent is never sent.`,
		Example: `  clasp webhook delete <webhook-id>`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.client().WebhookDelete(cmd.Context(), args[0]); err != nil {
				return err
			}
			return a.emit(map[string]any{"deleted": args[0]}, func(w io.Writer) { fmt.Fprintf(w, "Deleted webhook %s.\n", args[0]) })
		},
	}
}

func (a *app) newWebhookDeliveriesCmd() *cobra.Command {
	var limit int
	c := &cobra.Command{
		Use:   "deliveries WEBHOOK_ID [--limit N]",
		Short: "Show a subscription's delivery log, newest first",
		Long: `Show the deliveries of a subscription, newest first: the event, its status
(pending, delivered, failed), attempts, the last answer's HTTP status (or why
there was none) and how long it took. 'clasp webhook redeliver' sends one again.`,
		Example: `  clasp webhook deliveries <webhook-id>
  clasp webhook deliveries <webhook-id> --limit 5 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 1 || limit > 1000 {
				return usageErr(fmt.Errorf("--limit must be from 1 to 1000, not %d", limit))
			}
			page, err := a.client().WebhookDeliveries(cmd.Context(), args[0], limit)
			if err != nil {
				return err
			}
			return a.emit(page.Items, func(w io.Writer) {
				t := newTable(w, "ID", "EVENT", "ENTITY", "STATUS", "ATTEMPTS", "LAST ANSWER", "LATENCY", "CREATED")
				for _, d := range page.Items {
					last := none
					switch {
					case d.LastStatus != nil:
						last = strconv.Itoa(*d.LastStatus)
					case d.LastError != nil:
						last = truncateText(*d.LastError, 60)
					}
					lat := none
					if d.LatencyMs != nil {
						lat = strconv.Itoa(*d.LatencyMs) + "ms"
					}
					t.row(d.ID, d.Event, d.EntityID, d.Status, strconv.Itoa(d.Attempts), last, lat, fmtTime(d.CreatedAt))
				}
				t.flush()
			})
		},
	}
	c.Flags().IntVar(&limit, "limit", 50, "how many of the newest deliveries (1-1000)")
	return c
}

func (a *app) newWebhookRedeliverCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "redeliver DELIVERY_ID",
		Short: "Send a delivery again now, with the same Clasp-Delivery id",
		Long: `Send a delivery again at once, whatever its status, with the same
Clasp-Delivery id (receivers that drop duplicates by it see it once); it is
retried for another 24 hours if it fails.`,
		Example: `  clasp webhook redeliver <delivery-id>`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := a.client().WebhookRedeliver(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.emit(d, func(w io.Writer) { fmt.Fprintf(w, "Delivery %s (%s) will be sent again now.\n", d.ID, d.Event) })
		},
	}
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
