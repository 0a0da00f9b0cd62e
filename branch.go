package clasp

import (
	"fmt"
	"strings"
)

// DefaultBranchTemplate is a company's branch template unless it sets
// another: the work of issue ACME-12 goes on branch clasp/ACME-12.
const DefaultBranchTemplate = "clasp/{identifier}"

// The placeholders of a branch template: the issue's identifier (ACME-12,
// required) and the company's issue prefix (ACME).
const (
	PlaceholderIdentifier = "{identifier}"
	PlaceholderPrefix     = "{prefix}"
)

// maxBranchTemplate bounds a branch template's length.
const maxBranchTemplate = 200

// ValidateBranchTemplate checks a company's branch template t: at most 200
// bytes, containing {identifier}, not beginning with "refs/" (a branch
// name, not a ref), no other placeholder than {identifier} and {prefix},
// and naming a valid git branch (git check-ref-format
// --branch rules, checkRefName) for any issue. The error is 400
// invalid_request naming the field branchTemplate (the HTTP layer answers
// 422 for a body that fails it).
func ValidateBranchTemplate(t string) error {
	bad := func(format string, args ...any) error {
		return InvalidField("branchTemplate", "Field \"branchTemplate\" %s (got %q).", fmt.Sprintf(format, args...), truncateText(t, 64))
	}
	switch {
	case t == "":
		return bad("must not be empty; the default is %q", DefaultBranchTemplate)
	case len(t) > maxBranchTemplate:
		return bad("must be at most %d bytes", maxBranchTemplate)
	case !strings.Contains(t, PlaceholderIdentifier):
		return bad("must contain %s, so that each issue gets its own branch", PlaceholderIdentifier)
	case strings.HasPrefix(t, "refs/"):
		// git would make refs/heads/refs/heads/..., a name that reads as
		// two refs.
		return bad("must be a branch name without refs/ (%q, not %q)", strings.TrimPrefix(strings.TrimPrefix(t, "refs/"), "heads/"), t)
	}
	rest := strings.NewReplacer(PlaceholderIdentifier, "", PlaceholderPrefix, "").Replace(t)
	if strings.ContainsAny(rest, "{}") {
		return bad("may use only the placeholders %s and %s", PlaceholderIdentifier, PlaceholderPrefix)
	}
	// Identifiers and prefixes are letters, digits and one '-': a name
	// made with a sample is valid exactly when every name is.
	if err := checkRefName(BranchName(t, "AB", "AB-1")); err != nil {
		return bad("must make a valid git branch name: %v", err)
	}
	return nil
}

// checkRefName applies git check-ref-format's rules for a branch name
// (refs/heads/<name>): no component that begins with '.' or ends with
// ".lock", no "..", no control character, space or any of ~^:?*[\, no
// leading or trailing '/', no "//", no trailing '.', no "@{", not "@",
// not beginning with '-'.
func checkRefName(name string) error {
	switch {
	case name == "@":
		return fmt.Errorf("%q is not a branch name", name)
	case strings.HasPrefix(name, "-"):
		return fmt.Errorf("it must not begin with '-'")
	case strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/"):
		return fmt.Errorf("it must not begin or end with '/'")
	case strings.HasSuffix(name, "."):
		return fmt.Errorf("it must not end with '.'")
	case strings.Contains(name, ".."):
		return fmt.Errorf("it must not contain \"..\"")
	case strings.Contains(name, "//"):
		return fmt.Errorf("it must not contain \"//\"")
	case strings.Contains(name, "@{"):
		return fmt.Errorf("it must not contain \"@{\"")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return fmt.Errorf("it must not contain %q", r)
		}
	}
	for _, c := range strings.Split(name, "/") {
		if strings.HasPrefix(c, ".") || strings.HasSuffix(c, ".lock") {
			return fmt.Errorf("no part between slashes may begin with '.' or end with \".lock\" (%q)", c)
		}
	}
	return nil
}

// BranchName returns the branch template t names for issue identifier of
// a company whose issue prefix is prefix: {identifier} and {prefix}
// replaced. An empty t is DefaultBranchTemplate.
func BranchName(t, prefix, identifier string) string {
	if t == "" {
		t = DefaultBranchTemplate
	}
	return strings.NewReplacer(PlaceholderIdentifier, identifier, PlaceholderPrefix, prefix).Replace(t)
}

// IssueBranch reports whether branch is one template t names for an issue
// of the company of issue prefix prefix: when the part of t before
// {identifier} (with {prefix} replaced) is not empty, any branch under it
// ("clasp/" for the default template); else any branch of the template's
// shape (its text around {identifier}, an identifier PREFIX-N inside). A
// commit on such a branch must carry a stamp (RULES.md G3).
func IssueBranch(t, prefix, branch string) bool {
	if t == "" {
		t = DefaultBranchTemplate
	}
	before, after, _ := strings.Cut(t, PlaceholderIdentifier)
	r := strings.NewReplacer(PlaceholderPrefix, prefix)
	before = r.Replace(before)
	if before != "" {
		return strings.HasPrefix(branch, before)
	}
	after = r.Replace(after)
	mid, ok := strings.CutSuffix(branch, after)
	if !ok || !strings.HasPrefix(mid, prefix+"-") {
		return false
	}
	_, isStamp := ParseStamp(mid + "@0")
	return isStamp
}

// WorkspaceFor returns the workspace of issue identifier, checked out at
// epoch, of a company with branch template t and issue prefix prefix.
func WorkspaceFor(t, prefix, identifier string, epoch int64) *Workspace {
	return &Workspace{Branch: BranchName(t, prefix, identifier), Stamp: Stamp(identifier, epoch), Epoch: epoch}
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
