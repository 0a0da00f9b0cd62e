package cli

import (
	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp"
)

// newVersionCmd is `clasp version`: the build's version, commit, Go
// version and platform (clasp.Build), one line, or JSON with --json. The
// root's --version flag prints the same line.
func (a *app) newVersionCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this clasp binary",
		Long: `Print the version of this clasp binary, the commit it was built from and the Go
version that built it, e.g.

  clasp v1.2.3 (commit 02357fc4a1b2, go1.26.10, linux/amd64)

Release binaries (scripts/release.sh) carry the version and commit stamped at
link time; 'go install github.com/clasp-dev/clasp/cmd/clasp@v1.2.3' carries the
module version; a build from a git work tree carries the commit (and
"+modified" when the tree had uncommitted changes). A running server reports
its own version at GET /healthz.`,
		Example: `  clasp version
  clasp --version
  clasp version --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			b := clasp.Build()
			if jsonOut {
				return writeJSON(a.stdout, b)
			}
			_, err := a.stdout.Write([]byte(b.String() + "\n"))
			return err
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print {version, commit, modified, goVersion, platform} as JSON")
	return cmd
}
