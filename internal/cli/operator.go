package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// newOperatorCmd is `clasp operator`: operator tokens, the credentials of
// the people and tools that act as the board.
func (a *app) newOperatorCmd() *cobra.Command {
	g := a.newGroup("operator", "Manage operator tokens: who may act as the board, with which role, in which companies",
		`An operator token is the credential of a person or a tool acting as the
board. It has a name, a role and a scope:

  admin     everything in its scope, including operator tokens
            (an admin of every company also creates companies)
  operator  acts on issues, runs and agents (no adapters, no tokens)
  viewer    reads only: every write answers 403

The scope is every company, or one company (--company): a token scoped to
one company sees nothing of the others, whose ids answer 404 as unknown
ones do. The board token printed at first start is the admin token named
"board". Tokens are shown once, stored hashed, may expire (--expires),
record when they were last used, and are revoked at once on every replica.

These commands need an admin token in $`+EnvToken+`.`,
		`  export CLASP_TOKEN=$(cat .clasp/board-token)
  clasp operator token create alice --role operator --company <company-id>
  clasp operator token create dashboard --role viewer --expires 720h
  clasp operator token list
  clasp operator token revoke <token-id>
  clasp operator me`)
	tok := &cobra.Command{
		Use:   "token",
		Short: "Create, list, rotate and revoke operator tokens",
		Example: `  clasp operator token create alice --role operator --company <company-id>
  clasp operator token list --json`,
		RunE: groupRunE,
	}
	tok.AddCommand(a.newOperatorTokenCreateCmd(), a.newOperatorTokenListCmd(), a.newOperatorTokenRevokeCmd(), a.newOperatorTokenRotateCmd())
	g.AddCommand(tok, a.newOperatorMeCmd())
	return g
}

func (a *app) newOperatorTokenCreateCmd() *cobra.Command {
	var role, company, expires string
	c := &cobra.Command{
		Use:   "create NAME --role admin|operator|viewer [--company COMPANY_ID] [--expires DURATION|TIME]",
		Short: "Create an operator token and print it once",
		Long: `Create an operator token for a person or a tool. The token is printed this
once; the server keeps only its hash. Without --company it may act in every
company; an admin scoped to one company creates tokens of that company only.
--expires takes a duration from now (720h) or an RFC 3339 time.`,
		Example: `  clasp operator token create alice --role operator --company <company-id>
  clasp operator token create ci-dashboard --role viewer --expires 720h --json | jq -r .token`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := client.OperatorTokenCreateRequest{Name: args[0], Role: clasp.OperatorRole(role)}
			if !in.Role.Valid() {
				return usageErr(fmt.Errorf("--role must be admin, operator or viewer, not %q", role))
			}
			if company != "" {
				id, err := a.resolveCompany(cmd.Context(), company, "--company")
				if err != nil {
					return err
				}
				in.CompanyID = &id
			}
			if expires != "" {
				at, err := parseExpiry(expires, time.Now())
				if err != nil {
					return usageErr(err)
				}
				in.ExpiresAt = &at
			}
			t, err := a.client().OperatorTokenCreate(cmd.Context(), in)
			if err != nil {
				return err
			}
			return a.emit(t, func(w io.Writer) {
				printOperatorToken(w, t, a.scopeNames(cmd.Context(), t))
				fmt.Fprintf(w, "\nOperator token (shown only this once; store it now):\n%s\n", t.Token)
			})
		},
	}
	f := c.Flags()
	f.StringVar(&role, "role", "", "admin, operator or viewer (required)")
	f.StringVar(&company, "company", "", "the one company the token may see: its id, issue prefix or name (default: every company)")
	f.StringVar(&expires, "expires", "", "when the token stops working: a duration from now (720h) or an RFC 3339 time (default: never)")
	_ = c.MarkFlagRequired("role")
	return c
}

// parseExpiry reads --expires: a positive duration from now, or an RFC
// 3339 time.
func parseExpiry(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("--expires %q: the duration must be positive", s)
		}
		return now.Add(d).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--expires %q: want a duration (720h) or an RFC 3339 time (2027-01-31T00:00:00Z)", s)
	}
	return t, nil
}

func (a *app) newOperatorTokenListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List operator tokens (prefixes only, never the secrets)",
		Example: "  clasp operator token list\n  clasp operator token list --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ts, err := a.client().OperatorTokenList(cmd.Context())
			if err != nil {
				return err
			}
			return emitList(a, ts, "", func(w io.Writer, ts []*clasp.OperatorToken) {
				printOperatorTokens(w, ts, a.scopeNames(cmd.Context(), ts...))
			})
		},
	}
}

func (a *app) newOperatorTokenRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke TOKEN_ID",
		Short: "Revoke an operator token (it answers 401 from now on, everywhere)",
		Long: `Revoke an operator token: requests with it answer 401 at once on every
replica, its board sessions end (signed-in browsers are sent to sign in
again), and its open event streams end within a second.`,
		Example: "  clasp operator token revoke <token-id>",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := a.client().OperatorTokenRevoke(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.emit(t, func(w io.Writer) { fmt.Fprintf(w, "Revoked operator token %s (%s).\n", t.ID, t.Name) })
		},
	}
}

func (a *app) newOperatorTokenRotateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rotate TOKEN_ID",
		Short: "Replace an operator token with a new one of the same name, role, scope and expiry",
		Long: `Rotate an operator token: a new token is created with the same name, role,
scope and expiry and printed once, then the old one is revoked (its board
sessions end).`,
		Example: "  clasp operator token rotate <token-id>",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := a.client().OperatorTokenRotate(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.emit(t, func(w io.Writer) {
				printOperatorToken(w, t, a.scopeNames(cmd.Context(), t))
				fmt.Fprintf(w, "\nNew operator token (shown only this once; the old one is revoked):\n%s\n", t.Token)
			})
		},
	}
}

func (a *app) newOperatorMeCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "me",
		Short:   "Show who the board credential in use acts as: name, role, scope",
		Example: "  clasp operator me",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			me, err := a.client().OperatorMe(cmd.Context())
			if err != nil {
				return err
			}
			return a.emit(me, func(w io.Writer) {
				scope := "every company"
				if me.CompanyID != nil {
					scope = "company " + *me.CompanyID
				}
				fields(w, "ID", optStr(me.ID), "Name", me.Name, "Role", string(me.Role), "Scope", scope)
			})
		},
	}
}

// newBoardTokenCmd is `clasp board-token`, whose one command rotates the
// board token.
func (a *app) newBoardTokenCmd() *cobra.Command {
	g := a.newGroup("board-token", "Rotate the board token (the admin operator token made at first start)",
		`The board token is the admin operator token named "board" that 'clasp serve'
creates at first start and writes to <data-dir>/board-token.`,
		"  clasp board-token rotate --data-dir .clasp")
	var dataDir string
	rotate := &cobra.Command{
		Use:   "rotate [--data-dir DIR]",
		Short: "Replace the board token with a new one and revoke the old one",
		Long: `Rotate the board token: the server creates a new admin token named like the
one in use (same role, scope and expiry) and revokes the old one, whose
board sessions end. The new token is written to <data-dir>/board-token
(mode 0600) and printed once.

The token in use is $` + EnvToken + ` (or --token / --token-file); without one,
the one in <data-dir>/board-token. Any admin token can be rotated this way;
the file is written only when it held the token that was rotated, or when
--data-dir is given.`,
		Example: `  clasp board-token rotate                       # reads and rewrites ./.clasp/board-token
  clasp board-token rotate --data-dir /var/lib/clasp
  CLASP_TOKEN=clasp_bt_... clasp board-token rotate --json | jq -r .token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("data-dir") {
				dataDir = firstNonEmpty(a.getenv(EnvDataDir), dataDir)
			}
			file := filepath.Join(dataDir, BoardTokenFileName)
			old := a.bearer()
			fromFile := false
			if old == "" {
				b, err := os.ReadFile(file) // #nosec G304 -- the board token file of the data directory the user names
				if err != nil {
					return fmt.Errorf("no token to rotate: set $%s, or give --data-dir holding %s: %w", EnvToken, BoardTokenFileName, err)
				}
				old = strings.TrimSpace(string(b))
				a.token, fromFile = old, true
			}
			c := a.client()
			me, err := c.OperatorMe(cmd.Context())
			if err != nil {
				return err
			}
			if me.ID == nil {
				return errors.New("the server answers as the tokenless board (--local-trusted): there is no token to rotate")
			}
			t, err := c.OperatorTokenRotate(cmd.Context(), *me.ID)
			if err != nil {
				return err
			}
			wrote := ""
			if cur, err := os.ReadFile(file); fromFile || cmd.Flags().Changed("data-dir") || (err == nil && strings.TrimSpace(string(cur)) == old) { // #nosec G304 -- as above
				if err := writeSecretFile(file, t.Token+"\n"); err != nil {
					fmt.Fprintf(a.stderr, "clasp: writing %s failed (%v); the new token is printed below, store it now\n", file, err)
				} else {
					wrote = file
				}
			}
			return a.emit(t, func(w io.Writer) {
				printOperatorToken(w, t, a.scopeNames(cmd.Context(), t))
				if wrote != "" {
					fmt.Fprintf(w, "\nNew board token written to %s (mode 0600); the old one is revoked:\n%s\n", wrote, t.Token)
				} else {
					fmt.Fprintf(w, "\nNew board token (shown only this once; the old one is revoked):\n%s\n", t.Token)
				}
			})
		},
	}
	rotate.Flags().StringVar(&dataDir, "data-dir", DefaultDataDir, "the server's data directory, whose board-token file is read and rewritten (env "+EnvDataDir+")")
	g.AddCommand(rotate)
	return g
}

// scopeNames returns the names that name the companies ts are scoped to
// (nil with --json, which needs none).
func (a *app) scopeNames(ctx context.Context, ts ...*clasp.OperatorToken) *names {
	if a.jsonOut {
		return nil
	}
	n := a.names(0)
	for _, t := range ts {
		if t.CompanyID != nil {
			n.learnCompany(ctx, *t.CompanyID)
		}
	}
	return n
}

// printOperatorToken prints an operator token's fields, its scope by the
// company prefix n knows.
func printOperatorToken(w io.Writer, t *clasp.OperatorToken, n *names) {
	scope := "every company"
	if t.CompanyID != nil {
		scope = withID(n.company(*t.CompanyID), *t.CompanyID)
	}
	fields(w, "ID", t.ID, "Name", t.Name, "Role", string(t.Role), "Scope", scope, "Prefix", t.Prefix, "Created", fmtTime(t.CreatedAt),
		"Expires", optTime(t.ExpiresAt), "Last used", optTime(t.LastUsedAt), "Revoked", optTime(t.RevokedAt))
}

// printOperatorTokens prints operator tokens as a table, their scope by
// the company prefix n knows.
func printOperatorTokens(w io.Writer, ts []*clasp.OperatorToken, n *names) {
	t := newTable(w, "ID", "NAME", "ROLE", "SCOPE", "PREFIX", "EXPIRES", "LAST USED", "REVOKED")
	for _, o := range ts {
		scope := "all"
		if o.CompanyID != nil {
			scope = n.company(*o.CompanyID)
		}
		t.row(o.ID, o.Name, string(o.Role), scope, o.Prefix, optTime(o.ExpiresAt), optTime(o.LastUsedAt), optTime(o.RevokedAt))
	}
	t.flush()
}
