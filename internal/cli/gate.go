package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp"
)

// The git gate (RULES.md, The git gate): `clasp gate check` reads the
// stamps (Clasp-Issue trailers) of a range of commits and asks the
// server, in one request per 1000 stamps, whether each may be written;
// `clasp gate install` puts it in a repository's pre-receive hook.

// EnvGateToken is where the pre-receive hook's environment file keeps the
// gate token.
const EnvGateToken = "CLASP_GATE_TOKEN" // #nosec G101 -- the name of a variable, no credential

// gateEnvFile is the file beside the hook that holds the server URL and
// the gate token (mode 0600).
const gateEnvFile = "clasp-gate.env"

func (a *app) newGateCmd() *cobra.Command {
	g := a.newGroup("gate", "Refuse git commits stamped by a superseded holder",
		`Every checkout of an issue carries a fencing epoch (checkoutEpoch), and the
answers that grant an issue name its workspace: the branch the company's branch
template names (default clasp/{identifier}) and the stamp, a commit trailer such as

  Clasp-Issue: ACME-12@7

'clasp gate check' reads the stamps of a range of commits and asks the server,
in one request, whether each may be written: yes when the issue is held by a
live run at that epoch, or is done and was completed under it; no when a later
checkout superseded it, its holder is dead, or the issue is another company's
or unknown. A commit without a stamp on a branch of the company's template
(under clasp/ by default) is refused too.

'clasp gate install' makes a repository's pre-receive hook run the check on
every push, with a gate token (clasp gate token create): a read-only
credential that may call the check and nothing else.`,
		`  clasp gate token create --company ACME --name ci
  clasp gate check --repo /src/clasp --range HEAD~3..HEAD
  clasp gate install --repo /srv/git/app.git --company ACME`)
	tok := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke gate tokens",
		Example: `  clasp gate token create --company ACME --name ci
  clasp gate token list --company ACME`,
		RunE: groupRunE,
	}
	tok.AddCommand(a.newGateTokenCreateCmd(), a.newGateTokenListCmd(), a.newGateTokenRevokeCmd())
	g.AddCommand(tok, a.newGateCheckCmd(), a.newGateInstallCmd())
	return g
}

func (a *app) newGateTokenCreateCmd() *cobra.Command {
	var company, name string
	c := &cobra.Command{
		Use:   "create --company COMPANY [--name NAME]",
		Short: "Create a gate token and print it once",
		Long: `Create a gate token of a company: a read-only credential that may ask the
gate's check (POST /api/gate/check) and nothing else. It is printed this once;
the server keeps only its hash. Needs an admin token of the company.`,
		Example: `  clasp gate token create --company ACME --name ci
  clasp gate token create --company ACME --name ci --json | jq -r .token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := a.resolveCompany(cmd.Context(), company, "--company")
			if err != nil {
				return err
			}
			t, err := a.client().GateTokenCreate(cmd.Context(), id, name)
			if err != nil {
				return err
			}
			return a.emit(t, func(w io.Writer) {
				fields(w, "ID", t.ID, "Name", t.Name, "Company", t.CompanyID, "Prefix", t.Prefix)
				fmt.Fprintf(w, "\nGate token (shown only this once; store it now):\n%s\n", t.Token)
			})
		},
	}
	c.Flags().StringVar(&company, "company", "", "the company whose issues the token may ask about: its id, issue prefix or name (required)")
	c.Flags().StringVar(&name, "name", "gate", "a name for people")
	_ = c.MarkFlagRequired("company")
	return c
}

func (a *app) newGateTokenListCmd() *cobra.Command {
	var company string
	c := &cobra.Command{
		Use:     "list --company COMPANY",
		Short:   "List a company's gate tokens (never the secrets)",
		Example: `  clasp gate token list --company ACME`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := a.resolveCompany(cmd.Context(), company, "--company")
			if err != nil {
				return err
			}
			ts, err := a.client().GateTokenList(cmd.Context(), id)
			if err != nil {
				return err
			}
			return a.emit(ts, func(w io.Writer) {
				t := newTable(w, "ID", "NAME", "PREFIX", "CREATED", "REVOKED")
				for _, g := range ts {
					t.row(g.ID, g.Name, g.Prefix, g.CreatedAt.Format("2006-01-02 15:04"), optTime(g.RevokedAt))
				}
				t.flush()
			})
		},
	}
	c.Flags().StringVar(&company, "company", "", "the company: its id, issue prefix or name (required)")
	_ = c.MarkFlagRequired("company")
	return c
}

func (a *app) newGateTokenRevokeCmd() *cobra.Command {
	var company string
	c := &cobra.Command{
		Use:     "revoke TOKEN_ID --company COMPANY",
		Short:   "Revoke a gate token at once",
		Example: `  clasp gate token revoke <gate-token-id> --company ACME`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := a.resolveCompany(cmd.Context(), company, "--company")
			if err != nil {
				return err
			}
			t, err := a.client().GateTokenRevoke(cmd.Context(), id, args[0])
			if err != nil {
				return err
			}
			return a.emit(t, func(w io.Writer) { fmt.Fprintf(w, "Revoked gate token %s (%s).\n", t.ID, t.Name) })
		},
	}
	c.Flags().StringVar(&company, "company", "", "the company: its id, issue prefix or name (required)")
	_ = c.MarkFlagRequired("company")
	return c
}

// gateCommit is one commit of a checked range and the gate's verdict.
type gateCommit struct {
	Commit  string               `json:"commit"`
	Subject string               `json:"subject"`
	Stamps  []string             `json:"stamps"`
	OK      bool                 `json:"ok"`
	Reasons []string             `json:"reasons,omitempty"`
	Results []*clasp.GateVerdict `json:"results,omitempty"`
}

// gateReport is the --json answer of clasp gate check.
type gateReport struct {
	OK      bool          `json:"ok"`
	Range   string        `json:"range"`
	Ref     string        `json:"ref,omitempty"`
	Commits []*gateCommit `json:"commits"`
}

func (a *app) newGateCheckCmd() *cobra.Command {
	var rng, repo, ref string
	c := &cobra.Command{
		Use:   "check [--range A..B] [--ref REF] [--repo DIR] [--json]",
		Short: "Check that a range of commits may be written: every stamp current or completed",
		Long: `Read the commits of a range (git rev-list), take the Clasp-Issue trailers of
each ("Clasp-Issue: ACME-12@7") and ask the server, in one request, whether
each stamp may be written (RULES.md, The git gate). A commit with a malformed
stamp, or with none on a branch of the company's branch template
(default clasp/{identifier}: any branch under clasp/; the branch of --ref,
else the checked-out branch), is refused.

--range is what git rev-list takes: A..B, or "NEW --not --all" for the commits
of NEW that no ref holds yet. The credential is a gate token in $CLASP_TOKEN
(clasp gate token create). A server that cannot be asked refuses: the check
fails closed.

Exit codes: 0 every commit may be written, 1 a commit is refused (each named,
with why), 2 no verdict: bad input (no repository, a bad range) or a server
that could not be asked (down, unreachable, a revoked token). Anything but 0
refuses: the hook of 'clasp gate install' refuses the push.`,
		Example: `  clasp gate check --repo /src/clasp --range HEAD~3..HEAD
  clasp gate check --repo /src/clasp --range HEAD~3..HEAD --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.gateCheck(cmd.Context(), repo, rng, ref)
		},
	}
	f := c.Flags()
	f.StringVar(&rng, "range", "HEAD", "the commits to check, as git rev-list takes them: A..B, or \"NEW --not --all\"")
	f.StringVar(&ref, "ref", "", "the ref the commits go to (refs/heads/clasp/ACME-12); default: the checked-out branch")
	f.StringVar(&repo, "repo", ".", "the git repository")
	return c
}

// git runs git in dir with args and returns its standard output; a
// failure is a usage error (exit 2) naming git's complaint.
func runGit(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...) // #nosec G204 -- git with arguments, no shell
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

func (a *app) gateCheck(ctx context.Context, repo, rng, ref string) error {
	if ref == "" {
		out, err := runGit(ctx, repo, "symbolic-ref", "-q", "HEAD")
		if err == nil {
			ref = strings.TrimSpace(out)
		}
	}
	// One record per commit: hash, subject, then the trailer values,
	// separated by units; records by record separators.
	args := append([]string{"log", "--format=%H%x1f%s%x1f%(trailers:key=" + clasp.StampKey + ",valueonly,separator=%x1f)%x1e"}, strings.Fields(rng)...)
	out, err := runGit(ctx, repo, args...)
	if err != nil {
		return usageErr(err)
	}
	branch := strings.TrimPrefix(ref, "refs/heads/")
	rep := &gateReport{OK: true, Range: rng, Ref: ref, Commits: []*gateCommit{}}
	var stamps []clasp.GateStamp
	type at struct{ commit, stamp int }
	var where []at
	for _, rec := range strings.Split(out, "\x1e") {
		rec = strings.TrimLeft(rec, "\n")
		if rec == "" {
			continue
		}
		parts := strings.Split(rec, "\x1f")
		if len(parts) < 2 {
			continue
		}
		gc := &gateCommit{Commit: parts[0], Subject: parts[1], Stamps: []string{}, OK: true}
		for _, v := range parts[2:] {
			v = strings.TrimSpace(v)
			if v == "" {
				continue
			}
			gc.Stamps = append(gc.Stamps, v)
			st, ok := clasp.ParseStamp(v)
			if !ok {
				gc.OK = false
				gc.Reasons = append(gc.Reasons, fmt.Sprintf("malformed stamp %q: want %s: PREFIX-N@EPOCH", v, clasp.StampKey))
				continue
			}
			where = append(where, at{len(rep.Commits), len(stamps)})
			stamps = append(stamps, st)
		}
		rep.Commits = append(rep.Commits, gc)
	}
	// Ask the server even for no stamp: a gate that cannot ask refuses,
	// and the answer names the company's branch template.
	cl := a.client()
	verdicts := make([]*clasp.GateVerdict, 0, len(stamps))
	tmpl, prefix := "", ""
	for start := 0; start == 0 || start < len(stamps); start += 1000 {
		end := min(start+1000, len(stamps))
		res, err := cl.GateCheck(ctx, stamps[start:end])
		if err != nil {
			return a.gateUnasked(err)
		}
		verdicts = append(verdicts, res.Results...)
		tmpl, prefix = res.BranchTemplate, res.IssuePrefix
		if len(stamps) == 0 {
			break
		}
	}
	if branch != "" && clasp.IssueBranch(tmpl, prefix, branch) {
		for _, gc := range rep.Commits {
			if len(gc.Stamps) == 0 {
				gc.OK = false
				gc.Reasons = append(gc.Reasons, fmt.Sprintf("unstamped: a commit on %s, a branch of the company's template %s, must carry a %s trailer", branch, clasp.BranchName(tmpl, prefix, "<identifier>"), clasp.StampKey))
			}
		}
	}
	if len(verdicts) != len(stamps) {
		return &exitError{Code: ExitUsage, Err: fmt.Errorf("gate: refusing, the server answered %d verdicts for %d stamps", len(verdicts), len(stamps))}
	}
	for _, w := range where {
		gc, v := rep.Commits[w.commit], verdicts[w.stamp]
		gc.Results = append(gc.Results, v)
		if !v.OK {
			gc.OK = false
			gc.Reasons = append(gc.Reasons, v.Message)
		}
	}
	bad := 0
	for _, gc := range rep.Commits {
		if !gc.OK {
			bad++
			rep.OK = false
		}
	}
	if a.jsonOut {
		if err := writeJSON(a.stdout, rep); err != nil {
			return err
		}
	} else {
		for _, gc := range rep.Commits {
			if gc.OK {
				continue
			}
			for _, r := range gc.Reasons {
				fmt.Fprintf(a.stdout, "refused %s %s: %s\n", short(gc.Commit), gc.Subject, r)
			}
		}
		if bad == 0 {
			fmt.Fprintf(a.stdout, "gate: %d commits, %d stamps: all may be written\n", len(rep.Commits), len(stamps))
		} else {
			fmt.Fprintf(a.stdout, "gate: %d of %d commits refused\n", bad, len(rep.Commits))
		}
	}
	if bad > 0 {
		return &exitError{Code: ExitError}
	}
	return nil
}

// envGateEnv names, in the environment of the hook's gate check, the
// hook's environment file, so that a check that cannot ask the server
// points there instead of to --url.
const envGateEnv = "CLASP_GATE_ENV"

// gateUnasked reports a check the server could not answer (err): it prints
// the error, and where to set the server's URL and the gate token (the
// hook's environment file inside the hook, else --url or CLASP_URL), and
// returns the exitError of exit code 2: no verdict, which refuses.
func (a *app) gateUnasked(err error) error {
	err = fmt.Errorf("gate: refusing, the clasp server could not check the stamps: %w", err)
	envFile := a.getenv(envGateEnv)
	if envFile == "" {
		return &exitError{Code: ExitUsage, Err: err}
	}
	fmt.Fprintf(a.stderr, "error: %v\n", err)
	fmt.Fprintf(a.stderr, "The hook's server URL (CLASP_URL) and gate token (%s) are in %s.\n", EnvGateToken, envFile)
	return &exitError{Code: ExitUsage}
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// gateHook is the pre-receive hook: for each pushed ref, the commits the
// push adds to it (old..new; for a new ref, those no ref holds yet) go
// through clasp gate check. Any refusal, or a server that cannot be
// asked, refuses the whole push.
const gateHook = `#!/bin/sh
# clasp gate (clasp gate install): refuses pushed commits stamped by a
# superseded holder of their issue. The server URL and the gate token are
# in clasp-gate.env beside this file (mode 0600). Any non-zero exit of the
# check (1 refused, 2 no verdict) refuses the push.
set -u
` + envGateEnv + `="$(cd "$(dirname "$0")" && pwd)/` + gateEnvFile + `"
. "$` + envGateEnv + `"
CLASP_TOKEN=$` + EnvGateToken + `
export CLASP_URL CLASP_TOKEN ` + envGateEnv + `
status=0
while read -r old new ref; do
	case $new in *[!0]*) ;; *) continue ;; esac # a deletion adds no commit
	case $old in
	*[!0]*) range="$old..$new" ;;
	*) range="$new --not --all" ;;
	esac
	if ! %s gate check --repo . --ref "$ref" --range "$range" >&2; then
		echo "clasp gate: push to $ref refused" >&2
		status=1
	fi
done
exit $status
`

// The variables of the hook's environment file that name the gate token
// an install made, so that the next install of the same repository can
// revoke it.
const (
	envGateTokenID   = "CLASP_GATE_TOKEN_ID"   // #nosec G101 -- the name of a variable, no credential
	envGateCompanyID = "CLASP_GATE_COMPANY_ID" // the company of the token of CLASP_GATE_TOKEN_ID
)

// readGateEnv reads the hook's environment file at path, as written by
// gate install (NAME='value' lines): the values by name; an empty map when
// the file does not exist. A line that is not NAME=value is skipped.
func readGateEnv(path string) (map[string]string, error) {
	b, err := os.ReadFile(path) // #nosec G304 -- the hook's environment file of the repository the user names
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	vals := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || k == "" || strings.HasPrefix(k, "#") {
			continue
		}
		if len(v) >= 2 && strings.HasPrefix(v, "'") && strings.HasSuffix(v, "'") {
			v = strings.ReplaceAll(v[1:len(v)-1], `'\''`, "'")
		}
		vals[k] = v
	}
	return vals, nil
}

// inGoBuildCache reports whether the executable bin lies where the go
// command builds and caches binaries (a go-build directory of `go run`,
// or under $GOCACHE / go env GOCACHE): a path that goes away when the
// cache is trimmed or the run ends.
func inGoBuildCache(ctx context.Context, getenv func(string) string, bin string) bool {
	for _, part := range strings.Split(filepath.ToSlash(bin), "/") {
		if strings.HasPrefix(part, "go-build") {
			return true
		}
	}
	caches := []string{getenv("GOCACHE")}
	if goBin, err := exec.LookPath("go"); err == nil {
		// A go that would first fetch another toolchain is not waited for.
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if out, err := exec.CommandContext(gctx, goBin, "env", "GOCACHE").Output(); err == nil { // #nosec G204 -- the go command, fixed arguments
			caches = append(caches, strings.TrimSpace(string(out)))
		}
		cancel()
	}
	for _, c := range caches {
		if c == "" || c == "off" {
			continue
		}
		if rel, err := filepath.Rel(c, bin); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return true
		}
	}
	return false
}

// gateClaspBin returns the absolute path of the clasp binary the hook
// runs: flag (--clasp) when set, which must be an executable regular file,
// else this process's executable, which must not be in Go's build cache
// (the hook would break, and refuse every push, once the cache is
// trimmed). Either refusal is a usage error saying what to do.
func (a *app) gateClaspBin(ctx context.Context, flag string) (string, error) {
	if flag != "" {
		bin, err := filepath.Abs(flag)
		if err != nil {
			return "", usageErr(fmt.Errorf("--clasp: %w", err))
		}
		fi, err := os.Stat(bin)
		if err != nil {
			return "", usageErr(fmt.Errorf("--clasp: %w", err))
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return "", usageErr(fmt.Errorf("--clasp: %s is not an executable file", bin))
		}
		return bin, nil
	}
	bin, err := os.Executable()
	if err != nil {
		return "", err
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return "", err
	}
	if inGoBuildCache(ctx, a.getenv, bin) {
		return "", usageErr(fmt.Errorf("this clasp runs from Go's build cache (%s, e.g. go run), which is trimmed or removed, and the hook would then refuse every push: build the binary (go build -o clasp ./cmd/clasp) and run that, or give the path of an installed clasp with --clasp PATH", bin))
	}
	return bin, nil
}

func (a *app) newGateInstallCmd() *cobra.Command {
	var repo, company, tokenFile, claspFlag string
	c := &cobra.Command{
		Use:   "install --repo PATH (--company COMPANY | --gate-token-file FILE)",
		Short: "Install the gate as a repository's pre-receive hook",
		Long: `Install a pre-receive hook in the repository at --repo (bare or not) that runs
'clasp gate check' on the commits each push adds to each ref, so that a push
of a superseded holder's commits, to any branch, is refused with the reason
on the pusher's terminal. The hook runs this clasp binary (its absolute
path, or --clasp PATH; a binary in Go's build cache, as of go run, is
refused) and reads the server URL and a gate token from
hooks/clasp-gate.env (mode 0600): the token of --gate-token-file, or a new
one of --company (made with the admin token in $CLASP_TOKEN, its id
recorded in the file). Installing again replaces the token: the one a
previous install made is revoked (when its id cannot be found, it is
named with the command that revokes it). An existing pre-receive hook that
is not the gate's is left alone (refused).

In a repository that is not bare, git itself refuses a push to the
checked-out branch unless receive.denyCurrentBranch allows it; the install
says so.`,
		Example: `  clasp gate install --repo /srv/git/app.git --company ACME`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if (company == "") == (tokenFile == "") {
				return usageErr(errors.New("give --company (a new gate token is made) or --gate-token-file"))
			}
			hooks, err := runGit(ctx, repo, "rev-parse", "--git-path", "hooks")
			if err != nil {
				return usageErr(err)
			}
			hooks = strings.TrimSpace(hooks)
			if !filepath.IsAbs(hooks) {
				hooks = filepath.Join(repo, hooks)
			}
			hook := filepath.Join(hooks, "pre-receive")
			if old, err := os.ReadFile(hook); err == nil && !bytes.Contains(old, []byte("clasp gate install")) { // #nosec G304 -- the hook of the repository the user names
				return fmt.Errorf("%s exists and is not the gate's: merge it by hand (the gate's hook runs: clasp gate check --ref REF --range OLD..NEW)", hook)
			}
			bin, err := a.gateClaspBin(ctx, claspFlag)
			if err != nil {
				return err
			}
			envPath := filepath.Join(hooks, gateEnvFile)
			old, err := readGateEnv(envPath)
			if err != nil {
				return err
			}
			var token, tokenID, companyID string
			if tokenFile != "" {
				b, err := os.ReadFile(tokenFile) // #nosec G304 -- the token file the user names
				if err != nil {
					return usageErr(err)
				}
				token = strings.TrimSpace(string(b))
			} else {
				id, err := a.resolveCompany(ctx, company, "--company")
				if err != nil {
					return err
				}
				t, err := a.client().GateTokenCreate(ctx, id, gateTokenName(repo))
				if err != nil {
					return err
				}
				token, tokenID, companyID = t.Token, t.ID, id
			}
			if err := os.MkdirAll(hooks, 0o750); err != nil {
				return err
			}
			env := fmt.Sprintf("CLASP_URL=%s\n%s=%s\n", shellQuote(firstNonEmpty(a.url, a.getenv(EnvURL), DefaultURL)), EnvGateToken, shellQuote(token))
			if tokenID != "" {
				env += fmt.Sprintf("%s=%s\n%s=%s\n", envGateTokenID, shellQuote(tokenID), envGateCompanyID, shellQuote(companyID))
			}
			if err := writeFileMode(envPath, []byte(env), 0o600); err != nil {
				return err
			}
			if err := writeFileMode(hook, []byte(fmt.Sprintf(gateHook, shellQuote(bin))), 0o755); err != nil {
				return err
			}
			// The new token is in place: the one of a previous install
			// is of no more use.
			previous := a.replacedGateToken(ctx, old, token, companyID, repo)
			if bare, err := runGit(ctx, repo, "rev-parse", "--is-bare-repository"); err == nil && strings.TrimSpace(bare) == "false" {
				fmt.Fprintf(a.stderr, "note: %s is not bare: git itself refuses a push to its checked-out branch unless receive.denyCurrentBranch allows it (git config receive.denyCurrentBranch updateInstead)\n", repo)
			}
			return a.emit(map[string]string{"hook": hook, "env": envPath, "clasp": bin, "previousToken": previous}, func(w io.Writer) {
				fmt.Fprintf(w, "Installed the gate: %s runs %s gate check on every push; its server and gate token are in %s (mode 0600).\n", hook, bin, envPath)
				if previous != "" {
					fmt.Fprintln(w, previous)
				}
			})
		},
	}
	f := c.Flags()
	f.StringVar(&repo, "repo", ".", "the repository (bare or not)")
	f.StringVar(&company, "company", "", "make a new gate token of this company (its id, issue prefix or name)")
	f.StringVar(&tokenFile, "gate-token-file", "", "a file holding an existing gate token (clasp_gt_...)")
	f.StringVar(&claspFlag, "clasp", "", "the clasp binary the hook runs (default: this one, unless it is in Go's build cache)")
	return c
}

// gateTokenName is the name of the gate token gate install makes for the
// repository repo.
func gateTokenName(repo string) string {
	return "pre-receive " + filepath.Base(filepath.Clean(repo))
}

// replacedGateToken deals with the gate token of a previous install of
// repo, whose environment file held old, now that the hook holds token
// (of company companyID when this install made it, else ""). A token the
// previous install made, known by the id it recorded, or, for a file with
// the secret alone, found in companyID's tokens by its prefix and the name
// gate install gives, is revoked. It returns a sentence for the user: the
// token revoked, or the token left live with the command that revokes it;
// "" when there was no other token.
func (a *app) replacedGateToken(ctx context.Context, old map[string]string, token, companyID, repo string) string {
	secret := old[EnvGateToken]
	if secret == "" || secret == token {
		return ""
	}
	id, co := old[envGateTokenID], old[envGateCompanyID]
	name := ""
	if id == "" && companyID != "" {
		// An environment file with the secret alone: its token is found
		// by the prefix the server keeps.
		if ts, err := a.client().GateTokenList(ctx, companyID); err == nil {
			for _, t := range ts {
				if t.RevokedAt == nil && t.Prefix != "" && strings.HasPrefix(secret, t.Prefix) {
					id, co, name = t.ID, companyID, t.Name
					break
				}
			}
		}
		if name != gateTokenName(repo) {
			// Not made by an install of this repository: another use
			// may hold it.
			if id != "" {
				return fmt.Sprintf("The previous gate token %s (%s) of this hook is still live: revoke it, unless something else uses it, with: clasp gate token revoke %s --company %s", id, name, id, co)
			}
		}
	}
	if id == "" {
		return fmt.Sprintf("The previous gate token of this hook (it begins %s) is still live: find it with clasp gate token list --company COMPANY and revoke it with clasp gate token revoke ID --company COMPANY", secret[:min(len(secret), 12)])
	}
	if _, err := a.client().GateTokenRevoke(ctx, co, id); err != nil {
		return fmt.Sprintf("The previous gate token %s of this hook is still live (revoking it failed: %v): revoke it with clasp gate token revoke %s --company %s", id, err, id, co)
	}
	return fmt.Sprintf("Revoked the previous gate token %s of this hook.", id)
}

// writeFileMode writes data to path with mode perm, also when the file
// exists with another mode.
func writeFileMode(path string, data []byte, perm os.FileMode) error {
	if err := os.WriteFile(path, data, perm); err != nil { // #nosec G703 -- a file of the repository's hooks directory the user names, with the mode the caller chose
		return err
	}
	return os.Chmod(path, perm)
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
