package clasp

import (
	"os/exec"
	"strings"
	"testing"
)

// TestValidateBranchTemplate checks templates against the rules and,
// where git is installed, against git check-ref-format --branch itself:
// a template is valid exactly when it has {identifier}, no other
// placeholder, and git accepts the branch it names.
func TestValidateBranchTemplate(t *testing.T) {
	git, _ := exec.LookPath("git")
	for _, c := range []struct {
		tmpl string
		ok   bool
	}{
		{DefaultBranchTemplate, true},
		{"{identifier}", true},
		{"agents/{prefix}/{identifier}", true},
		{"feature/{identifier}-work", true},
		{"team.a/{identifier}", true},
		{"", false},
		{"clasp/main", false},
		{"clasp/{id}/{identifier}", false},
		{"{prefix}", false},
		{"a..b/{identifier}", false},
		{"{identifier}.lock", false},
		{"x/{identifier}.lock/y", false},
		{"/{identifier}", false},
		{"{identifier}/", false},
		{"a//{identifier}", false},
		{"{identifier}.", false},
		{".hidden/{identifier}", false},
		{"a/.b/{identifier}", false},
		{"w {identifier}", false},
		{"w~{identifier}", false},
		{"w^{identifier}", false},
		{"w:{identifier}", false},
		{"w?{identifier}", false},
		{"w*{identifier}", false},
		{"w[{identifier}", false},
		{"w\\{identifier}", false},
		{"w@{{identifier}", false},
		{"-{identifier}", false},
		{"refs/heads/{identifier}", false},
		{"refs/{identifier}", false},
		{"refs/heads/clasp/{identifier}", false},
		{"prefs/{identifier}", true},
		{"w\t{identifier}", false},
		{strings.Repeat("a", 190) + "/{identifier}", false},
	} {
		err := ValidateBranchTemplate(c.tmpl)
		if (err == nil) != c.ok {
			t.Errorf("ValidateBranchTemplate(%q) = %v, want ok %v", c.tmpl, err, c.ok)
		}
		if err != nil {
			if ce := AsError(err); ce == nil || ce.Code != CodeInvalidRequest || ce.Details["field"] != "branchTemplate" {
				t.Errorf("ValidateBranchTemplate(%q): %v, want invalid_request naming branchTemplate", c.tmpl, err)
			}
			if strings.HasPrefix(c.tmpl, "refs/") && !strings.Contains(err.Error(), "without refs/") {
				t.Errorf("ValidateBranchTemplate(%q): %v, want it to say to give the branch name without refs/", c.tmpl, err)
			}
		}
		// git agrees on the name of every template whose placeholders
		// are right.
		rest := strings.NewReplacer(PlaceholderIdentifier, "", PlaceholderPrefix, "").Replace(c.tmpl)
		// git takes a branch named refs/heads/x (as refs/heads/refs/heads/x).
		if git == "" || strings.HasPrefix(c.tmpl, "refs/") || !strings.Contains(c.tmpl, PlaceholderIdentifier) || strings.ContainsAny(rest, "{}") || len(c.tmpl) > maxBranchTemplate {
			continue
		}
		name := BranchName(c.tmpl, "AB", "AB-1")
		gitOK := exec.Command(git, "check-ref-format", "--branch", name).Run() == nil
		if gitOK != c.ok {
			t.Errorf("git check-ref-format --branch %q: ok %v; the template's verdict is %v", name, gitOK, c.ok)
		}
	}
}

// TestIssueBranch: the branches a template names for a company's issues,
// by the template's prefix when it has one, else by its shape.
func TestIssueBranch(t *testing.T) {
	for _, c := range []struct {
		tmpl, branch string
		want         bool
	}{
		{"", "clasp/ACME-1", true},
		{DefaultBranchTemplate, "clasp/anything", true},
		{DefaultBranchTemplate, "main", false},
		{"agents/{prefix}/{identifier}", "agents/ACME/ACME-12", true},
		{"agents/{prefix}/{identifier}", "agents/OTHER/OTHER-1", false},
		{"{identifier}", "ACME-3", true},
		{"{identifier}", "main", false},
		{"{identifier}", "OTHER-3", false},
		{"{identifier}-work", "ACME-3-work", true},
		{"{identifier}-work", "ACME-3", false},
		{"{prefix}-{identifier}", "ACME-ACME-3", true},
	} {
		if got := IssueBranch(c.tmpl, "ACME", c.branch); got != c.want {
			t.Errorf("IssueBranch(%q, ACME, %q) = %v, want %v", c.tmpl, c.branch, got, c.want)
		}
	}
	if got := BranchName("agents/{prefix}/{identifier}", "ACME", "ACME-12"); got != "agents/ACME/ACME-12" {
		t.Errorf("BranchName: %q", got)
	}
}
