package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"

	"github.com/clasp-dev/clasp"
)

// Paperclip compatibility of request bodies (README, "Paperclip
// compatibility"): a client written for Paperclip sends fields clasp does
// not model with every request (its defaults, or null). Such a field is
// accepted when it carries null or Paperclip's default, and refused with
// 400 invalid_request naming the field and saying which concept clasp
// lacks when it carries anything else. Fields that are neither clasp's nor
// Paperclip's stay "unknown" (400).

// compatField is one Paperclip request field that clasp does not model.
type compatField struct {
	// concept says what clasp lacks, as a sentence: "clasp has no projects".
	concept string
	// def is Paperclip's default as JSON ("0", "false", "[]", `"standard"`),
	// "" when Paperclip has none (then only null is accepted).
	def string
	// also, when set, accepts further values (a whole class, such as
	// any boolean where both values mean the same to clasp).
	also func(raw json.RawMessage) bool
}

// compatFielder is implemented by request bodies that accept Paperclip's
// unmodelled fields; decodeJSON consults it for keys that are no json tag.
type compatFielder interface {
	compatFields() map[string]compatField
}

// compatNoter is implemented by request bodies that want to know which
// accepted Paperclip fields a body carried (a PATCH of only such fields
// changes nothing and answers the resource as it is).
type compatNoter interface {
	noteCompat(keys []string)
}

// checkCompatFields checks the Paperclip fields keys of the JSON object
// data (already known to be one valid object without duplicate keys): each
// must be null, equal to its Paperclip default, or accepted by its also
// function. 400 invalid_request naming the first field that is not.
func checkCompatFields(data []byte, fields map[string]compatField, keys []string) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return clasp.Errorf(clasp.CodeInvalidRequest, "The request body is not a valid JSON object: %s.", trimJSONErr(err))
	}
	for _, k := range keys {
		f, v := fields[k], bytes.TrimSpace(raw[k])
		if string(v) == "null" || (f.def != "" && jsonEqual(v, []byte(f.def))) || (f.also != nil && f.also(v)) {
			continue
		}
		if f.def == "" {
			return clasp.InvalidField(k, "%s: field %q is accepted only as null or absent, not %s.", f.concept, k, truncate(string(v), 64)).
				WithDetails("paperclipField", true)
		}
		return clasp.InvalidField(k, "%s: field %q is accepted only as null or %s (Paperclip's default), not %s.", f.concept, k, f.def, truncate(string(v), 64)).
			WithDetails("paperclipField", true)
	}
	return nil
}

// jsonEqual reports whether two JSON values are equal as values (numbers
// compared as numbers, objects without regard to key order).
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// anyBool accepts true and false: for fields whose both values mean the
// same to clasp.
func anyBool(raw json.RawMessage) bool {
	s := string(raw)
	return s == "true" || s == "false"
}

// Concepts clasp does not have, shared by several request bodies.
const (
	noProjects   = "clasp has no projects"
	noGoals      = "clasp has no goals"
	noWorkspaces = "clasp has no execution workspaces"
)

// issueCompat are the fields of Paperclip's issue create (and, all of them
// optional, of its issue PATCH) that clasp does not model. allowDuplicate
// takes both values: clasp never deduplicates issues by title, so true is
// what it does and false is Paperclip's default.
var issueCompat = map[string]compatField{
	"projectId":                            {concept: noProjects},
	"projectWorkspaceId":                   {concept: noProjects},
	"goalId":                               {concept: noGoals},
	"teamId":                               {concept: "clasp has no teams"},
	"inheritExecutionWorkspaceFromIssueId": {concept: noWorkspaces},
	"estimate":                             {concept: "clasp has no estimates"},
	"assigneeUserId":                       {concept: "clasp assigns issues only to agents (it has no users)"},
	"requestDepth":                         {concept: "clasp has no delegation depth", def: "0"},
	"billingCode":                          {concept: "clasp has no billing codes"},
	"assigneeAdapterOverrides":             {concept: "clasp has no per-issue adapter overrides"},
	"executionPolicy":                      {concept: "clasp has no execution policies"},
	"executionWorkspaceId":                 {concept: noWorkspaces},
	"executionWorkspacePreference":         {concept: noWorkspaces},
	"executionWorkspaceSettings":           {concept: noWorkspaces},
	"labelIds":                             {concept: "clasp has no labels", def: "[]"},
	"workMode":                             {concept: "clasp has no work modes", def: `"standard"`},
	"allowDuplicate":                       {concept: "clasp never deduplicates issues", def: "false", also: anyBool},
}

// issueUpdateCompat adds the PATCH-only fields of Paperclip to issueCompat.
var issueUpdateCompat = merge(issueCompat, map[string]compatField{
	"reopen":    {concept: "clasp has no reopen flag (PATCH status to reopen an issue)", def: "false"},
	"interrupt": {concept: "clasp does not interrupt runs from a write (the board cancels a run with POST /api/runs/{id}/cancel)", def: "false"},
	"resume":    {concept: "clasp has no resume flag", def: "false"},
	"hiddenAt":  {concept: "clasp has no hidden issues"},
})

// commentCompat are the fields of Paperclip's comment create that clasp
// does not model. authorType is derived from the credential, as in
// Paperclip, so only null is accepted besides the actor's own type
// (checked by the handler).
var commentCompat = map[string]compatField{
	"reopen":       {concept: "clasp has no reopen flag (PATCH status to reopen an issue)", def: "false"},
	"interrupt":    {concept: "clasp does not interrupt runs from a comment (the board cancels a run with POST /api/runs/{id}/cancel)", def: "false"},
	"resume":       {concept: "clasp has no resume flag", def: "false"},
	"presentation": {concept: "clasp has no comment presentations"},
	"metadata":     {concept: "clasp has no comment metadata", def: "{}"},
}

// merge returns a new map with the entries of a and then b.
func merge(a, b map[string]compatField) map[string]compatField {
	m := make(map[string]compatField, len(a)+len(b))
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}

// agentCompat are the fields of Paperclip's agent create that clasp does
// not model.
var agentCompat = map[string]compatField{
	"title":                {concept: "clasp has no agent titles"},
	"icon":                 {concept: "clasp has no agent icons"},
	"appearance":           {concept: "clasp has no agent appearance"},
	"reportsTo":            {concept: "clasp has no org chart"},
	"capabilities":         {concept: "clasp has no agent capability descriptions"},
	"desiredSkills":        {concept: "clasp has no skills", def: "[]"},
	"instructionsBundle":   {concept: "clasp has no instruction bundles"},
	"defaultEnvironmentId": {concept: "clasp has no environments"},
	"budgetMonthlyCents":   {concept: "clasp has no budgets", def: "0"},
	"permissions":          {concept: "clasp has no agent permissions (an agent acts in its own company)", def: "{}"},
	"metadata":             {concept: "clasp has no agent metadata", def: "{}"},
}

// paperclipProcessConfig is the adapterConfig of Paperclip's process
// adapter, as clasp maps it: command and args, cwd, env (each value a
// string or a {"type": "plain", "value": ...} binding), timeoutSec.
type paperclipProcessConfig struct {
	Command    *string                    `json:"command"`
	Args       []string                   `json:"args"`
	Cwd        *string                    `json:"cwd"`
	Env        map[string]json.RawMessage `json:"env"`
	TimeoutSec *int                       `json:"timeoutSec"`
}

func (c *paperclipProcessConfig) compatFields() map[string]compatField {
	return map[string]compatField{
		"graceSec": {concept: "clasp has a fixed grace between SIGTERM and SIGKILL", def: "15"},
	}
}

// paperclipRuntimeConfig is the runtimeConfig of Paperclip's agent create:
// clasp reads its heartbeat settings.
type paperclipRuntimeConfig struct {
	Heartbeat json.RawMessage `json:"heartbeat"` // a paperclipHeartbeat
}

func (c *paperclipRuntimeConfig) compatFields() map[string]compatField {
	return map[string]compatField{
		"aiConnection": {concept: "clasp has no AI connections"},
		"debug":        {concept: "clasp has no adapter debug settings"},
	}
}

// paperclipHeartbeat is runtimeConfig.heartbeat: when the server wakes
// the agent. Absent fields take Paperclip's defaults (enabled, waking on
// assignment, no timer, one run at a time).
type paperclipHeartbeat struct {
	Enabled           *bool `json:"enabled"`
	IntervalSec       *int  `json:"intervalSec"`
	WakeOnAssignment  *bool `json:"wakeOnAssignment"`
	MaxConcurrentRuns *int  `json:"maxConcurrentRuns"`
}

func (h *paperclipHeartbeat) compatFields() map[string]compatField {
	return map[string]compatField{
		"wakeOnDemand": {concept: "clasp always accepts on-demand wakes", def: "true"},
		"cooldownSec":  {concept: "clasp has no wake cooldown", def: "0"},
	}
}

// paperclipAdapter maps Paperclip's adapterType, adapterConfig and
// runtimeConfig (raw JSON, nil when absent) to clasp's process adapter,
// normalized. It returns nil for no adapter: no adapterType, or a process
// adapter without any settings (an agent that runs itself). 400
// invalid_request naming the field (adapterType, adapterConfig.<field>,
// runtimeConfig.heartbeat.<field>) for another adapter type, settings
// without adapterType, secret env bindings, or settings the process
// adapter refuses.
func paperclipAdapter(adapterType *string, cfg, rt json.RawMessage) (*clasp.AdapterConfig, error) {
	empty := func(raw json.RawMessage) bool {
		s := string(bytes.TrimSpace(raw))
		return s == "" || s == "null" || s == "{}"
	}
	if adapterType == nil {
		if !empty(cfg) || !empty(rt) {
			return nil, clasp.InvalidField("adapterType", "adapterConfig and runtimeConfig need adapterType %q, the only adapter clasp runs.", clasp.AdapterProcess)
		}
		return nil, nil
	}
	if *adapterType != clasp.AdapterProcess {
		return nil, clasp.InvalidField("adapterType", "clasp runs agents only with Paperclip's %q adapter, not %q; omit adapterType for an agent that runs itself.", clasp.AdapterProcess, truncate(*adapterType, 64))
	}
	if empty(cfg) && empty(rt) {
		return nil, nil
	}
	var pc paperclipProcessConfig
	if !empty(cfg) {
		if err := decodeJSONBytes(cfg, &pc); err != nil {
			return nil, prefixField(err, "adapterConfig")
		}
	}
	c := &clasp.AdapterConfig{Type: clasp.AdapterProcess, Args: pc.Args,
		Heartbeat: clasp.HeartbeatConfig{Enabled: true, WakeOnAssignment: true}}
	if pc.Command != nil {
		c.Command = *pc.Command
	}
	if pc.Cwd != nil {
		c.Cwd = *pc.Cwd
	}
	if pc.TimeoutSec != nil {
		c.TimeoutSec = *pc.TimeoutSec
	}
	for k, raw := range pc.Env {
		v, ok := plainEnvValue(raw)
		if !ok {
			return nil, clasp.InvalidField("adapterConfig.env", "clasp has no secrets store: env %s must be a string or {\"type\": \"plain\", \"value\": \"...\"}.", truncate(k, 64))
		}
		if c.Env == nil {
			c.Env = map[string]string{}
		}
		c.Env[k] = v
	}
	if !empty(rt) {
		var r paperclipRuntimeConfig
		if err := decodeJSONBytes(rt, &r); err != nil {
			return nil, prefixField(err, "runtimeConfig")
		}
		if !empty(r.Heartbeat) {
			h := &paperclipHeartbeat{}
			if err := decodeJSONBytes(r.Heartbeat, h); err != nil {
				return nil, prefixField(prefixField(err, "heartbeat"), "runtimeConfig")
			}
			if h.Enabled != nil {
				c.Heartbeat.Enabled = *h.Enabled
			}
			if h.IntervalSec != nil {
				c.Heartbeat.IntervalSec = *h.IntervalSec
			}
			if h.WakeOnAssignment != nil {
				c.Heartbeat.WakeOnAssignment = *h.WakeOnAssignment
			}
			if h.MaxConcurrentRuns != nil {
				c.Heartbeat.MaxConcurrentRuns = *h.MaxConcurrentRuns
			}
		}
	}
	if err := c.Normalize(); err != nil {
		var ce *clasp.Error
		if errors.As(err, &ce) {
			if f, _ := ce.Details["field"].(string); strings.HasPrefix(f, "heartbeat.") {
				return nil, prefixField(err, "runtimeConfig")
			}
		}
		return nil, prefixField(err, "adapterConfig")
	}
	return c, nil
}

// plainEnvValue decodes one Paperclip env binding: a JSON string, or
// {"type": "plain", "value": "<string>"}. ok is false for anything else
// (secret references among them).
func plainEnvValue(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var b struct {
		Type  string  `json:"type"`
		Value *string `json:"value"`
	}
	if json.Unmarshal(raw, &b) != nil || b.Type != "plain" || b.Value == nil {
		return "", false
	}
	return *b.Value, true
}
