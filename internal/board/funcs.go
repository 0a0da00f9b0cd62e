package board

import (
	"encoding/json"
	"fmt"
	"html/template"
	"sort"
	"strings"
	"time"
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
	// short returns the last 8 characters of an id (ids are UUIDv7,
	// whose first characters are a timestamp shared by ids made together).
	"short": func(s string) string {
		if len(s) > 8 {
			return s[len(s)-8:]
		}
		return s
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
	// details renders an activity's details JSON compactly as text.
	"details": func(raw json.RawMessage) string {
		if len(raw) == 0 || string(raw) == "null" || string(raw) == "{}" {
			return ""
		}
		var m map[string]any
		if json.Unmarshal(raw, &m) != nil {
			return string(raw)
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			var b strings.Builder
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false) // html/template escapes the result
			_ = enc.Encode(m[k])
			parts = append(parts, k+"="+strings.Trim(strings.TrimSpace(b.String()), `"`))
		}
		return strings.Join(parts, " ")
	},
	"eq":   func(a, b any) bool { return fmt.Sprint(a) == fmt.Sprint(b) },
	"join": strings.Join,
}

func init() {
	funcs["actions"] = func() []string { return Actions }
	funcs["list"] = func(s ...string) []string { return s }
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
