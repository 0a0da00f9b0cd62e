package postgres

// InList is store.Driver.InList: plain equality for one value, = ANY of a
// text array for more. Only with plain equality does the planner read one
// status's range of issues_company_status_created (schema v7) in a list's
// order and stop after the page; with ANY it sorts.
func (*Driver) InList(col string, values []string) (string, []any) {
	if len(values) == 1 {
		return col + " = ?", []any{values[0]}
	}
	return col + " = ANY(?::text[])", []any{values}
}

// LikeFold is store.Driver.LikeFold: ILIKE, whose escape is \.
func (*Driver) LikeFold(col, pattern string) (string, []any) { return col + " ILIKE ?", []any{pattern} }
