package board

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/clasp-dev/clasp"
)

// funcs are the templates' helpers. None returns markup: whatever they
// return is escaped by html/template like any other value.
var funcs = template.FuncMap{
	// str returns *s, or "" for nil.
	"str": func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	},
	// rfc formats a time as RFC 3339 with milliseconds ("" for nil), for data attributes.
	"rfc": func(t any) string {
		switch v := t.(type) {
		case *time.Time:
			if v == nil {
				return ""
			}
			return v.UTC().Format("2006-01-02T15:04:05.000Z07:00")
		case time.Time:
			return v.UTC().Format("2006-01-02T15:04:05.000Z07:00")
		}
		return ""
	},
	// when formats a time for people (UTC, seconds), "—" for nil.
	"when": func(t any) string {
		switch v := t.(type) {
		case *time.Time:
			if v == nil {
				return "—"
			}
			return v.UTC().Format("2006-01-02 15:04:05Z")
		case time.Time:
			return v.UTC().Format("2006-01-02 15:04:05Z")
		}
		return "—"
	},
	// label turns a status such as in_progress into "in progress".
	"label": func(s any) string { return strings.ReplaceAll(fmt.Sprint(s), "_", " ") },
	"eq":    func(a, b any) bool { return fmt.Sprint(a) == fmt.Sprint(b) },
	"join":  strings.Join,
	// deref shows a nullable number or text of an answer.
	"deref": func(p any) string {
		switch v := p.(type) {
		case *int:
			if v != nil {
				return fmt.Sprint(*v)
			}
		case *string:
			if v != nil {
				return *v
			}
		}
		return ""
	},
}

func init() {
	funcs["actions"] = func() []string { return Actions }
	funcs["list"] = func(s ...string) []string { return s }
	funcs["waitingOn"] = waitingOn
	funcs["depOf"] = func(v *view, s clasp.IssueSummary) any {
		return struct {
			Issue   clasp.IssueSummary
			Company string
		}{s, v.Company.ID}
	}
	funcs["list1"] = func(s seg) []seg { return []seg{s} }
	funcs["cardOf"] = func(v *view, c card) any {
		return struct {
			Card    card
			Company string
		}{c, v.Company.ID}
	}
	funcs["rowsOf"] = func(v *view, rows []runRow, live bool) any {
		return struct {
			View *view
			Rows []runRow
			Live bool
		}{v, rows, live}
	}
	funcs["heldOf"] = func(v *view, rows []heldRow) any {
		return struct {
			Rows    []heldRow
			Company string
		}{rows, v.Company.ID}
	}
}
