package httpapi

import (
	"strings"
	"unicode/utf8"

	"github.com/clasp-dev/clasp"
)

// Length limits of text fields, in characters.
const (
	maxNameLen        = 200
	maxTitleLen       = 500
	maxDescriptionLen = 100_000
	maxCommentLen     = 100_000
	maxReasonLen      = 2_000
	maxRunErrorLen    = 10_000
	maxSourceLen      = 64
	maxRefLen         = 100 // an issue UUID or identifier in a path or body
)

// requiredText checks a required text field: present, not blank, at most
// max characters. 400 invalid_request naming field.
func requiredText(field string, v *string, max int) error {
	if v == nil {
		return clasp.InvalidField(field, "Field %q is required.", field)
	}
	if strings.TrimSpace(*v) == "" {
		return clasp.InvalidField(field, "Field %q must not be blank.", field)
	}
	return maxText(field, *v, max)
}

// optionalText checks an optional text field's length (nil is fine).
func optionalText(field string, v *string, max int) error {
	if v == nil {
		return nil
	}
	return maxText(field, *v, max)
}

// maxText checks that v has at most max characters and no NUL.
func maxText(field, v string, max int) error {
	if n := utf8.RuneCountInString(v); n > max {
		return clasp.InvalidField(field, "Field %q is %d characters long; at most %d are allowed.", field, n, max).WithDetails("max", max)
	}
	if strings.IndexByte(v, 0) >= 0 {
		return clasp.InvalidField(field, "Field %q must not contain NUL characters.", field)
	}
	return nil
}

// uuidField checks and canonicalises an optional UUID field in place.
func uuidField(field string, v *string) error {
	if v == nil {
		return nil
	}
	u, ok := parseUUID(*v)
	if !ok {
		return clasp.InvalidField(field, "Field %q must be a UUID, not %q.", field, truncate(*v, 64))
	}
	*v = u
	return nil
}

// issueStatus checks an optional issue status field.
func issueStatus(field string, v *clasp.IssueStatus) error {
	if v != nil && !v.Valid() {
		return clasp.InvalidField(field, "Field %q must be one of backlog, todo, in_progress, in_review, blocked, done, cancelled; not %q.", field, truncate(string(*v), 64))
	}
	return nil
}

// priority checks an optional priority field.
func priority(field string, v *clasp.Priority) error {
	if v != nil && !v.Valid() {
		return clasp.InvalidField(field, "Field %q must be one of critical, high, medium, low; not %q.", field, truncate(string(*v), 64))
	}
	return nil
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// maxBlockers is the most blockers one issue may list in a request.
const maxBlockers = 1000

// issueRefField checks an optional issue ref field (a UUID or an
// identifier such as ACME-12): 400 invalid_request naming field
// otherwise. A UUID is normalised in place.
func issueRefField(field string, v *string) error {
	if v == nil {
		return nil
	}
	if !validIssueRef(*v) {
		return clasp.InvalidField(field, "Field %q must be an issue id (a UUID) or identifier (such as ACME-12), not %q.", field, truncate(*v, 64))
	}
	if u, ok := parseUUID(*v); ok {
		*v = u
	}
	return nil
}

// blockerRefs checks a blockedByIssueIds list: each entry a UUID or
// identifier (an empty or null entry named as such), at most maxBlockers
// different ones (a repeated entry counts once, as the edges it makes do);
// 400 invalid_request, details.field blockedByIssueIds. UUIDs are
// normalised in place.
func blockerRefs(refs []string) error {
	distinct := make(map[string]struct{}, min(len(refs), maxBlockers+1))
	for i := range refs {
		if refs[i] == "" {
			return clasp.InvalidField("blockedByIssueIds", "Field \"blockedByIssueIds\" has an empty or null entry at position %d; each entry is an issue id (a UUID) or identifier (such as ACME-12).", i)
		}
		if err := issueRefField("blockedByIssueIds", &refs[i]); err != nil {
			return err
		}
		distinct[refs[i]] = struct{}{}
		if len(distinct) > maxBlockers {
			return clasp.InvalidField("blockedByIssueIds", "Field \"blockedByIssueIds\" lists more than %d different issues; at most %d may block one issue.", maxBlockers, maxBlockers)
		}
	}
	return nil
}
