package clasp

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at link time by scripts/release.sh:
//
//	go build -ldflags "-X github.com/clasp-dev/clasp.version=v1.2.3 -X github.com/clasp-dev/clasp.commit=<sha>"
//
// Empty means: take them from the build information the go command embeds.
var (
	version string
	commit  string
)

// BuildInfo identifies the build of the running binary. Version is a
// semantic version ("v1.2.3" from a tag, "v0.0.0-20261201085708-02357fc4a1b2"
// as the go command derives it from a commit, or "devel" when nothing says);
// Commit is the full VCS revision, or "" when unknown; Modified is true when
// the work tree had uncommitted changes at build time.
type BuildInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"` // GOOS/GOARCH
}

// Build returns the running binary's BuildInfo: the values stamped with
// -ldflags -X when present, else those of runtime/debug.ReadBuildInfo (the
// module version for `go install ...@v1.2.3`, the vcs.revision and
// vcs.modified settings for a build from a git work tree).
func Build() BuildInfo {
	b := BuildInfo{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.modified":
				// Only meaningful for the revision the go command recorded.
				if commit == "" {
					b.Modified = s.Value == "true"
				}
			}
		}
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	return b
}

// Version returns Build().Version.
func Version() string { return Build().Version }

// String is the one-line form `clasp version` prints:
// "clasp v1.2.3 (commit 02357fc4a1b2, go1.26.10, linux/amd64)".
func (b BuildInfo) String() string {
	c := b.Commit
	if c == "" {
		c = "unknown"
	} else if len(c) > 12 {
		c = c[:12]
	}
	if b.Modified {
		c += "+modified"
	}
	return fmt.Sprintf("clasp %s (commit %s, %s, %s)", b.Version, c, b.GoVersion, b.Platform)
}
