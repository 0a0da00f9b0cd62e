package postgres

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// columnPlans are the pgx scan plans of one statement's answer columns, and
// what they were planned for: each column's type OID and format, and the
// type of the destination it scans into. pgx plans a scan from exactly
// these (and the connection's type map, which clasp leaves at pgx's
// defaults on every connection), and plans do not change once made, so
// plans that fit a later answer of the statement scan it as pgx's own
// planning would.
type columnPlans struct {
	oids    []uint32
	formats []int16
	types   []reflect.Type
	plans   []pgtype.ScanPlan
}

// fits reports whether c was planned for these columns and destinations.
func (c *columnPlans) fits(fds []pgconn.FieldDescription, dest []any) bool {
	if len(c.plans) != len(fds) || len(fds) != len(dest) {
		return false
	}
	for i := range fds {
		if c.oids[i] != fds[i].DataTypeOID || c.formats[i] != fds[i].Format || c.types[i] != reflect.TypeOf(dest[i]) {
			return false
		}
	}
	return true
}

// planColumns plans the scan of every column of fds into dest with m.
func planColumns(m *pgtype.Map, fds []pgconn.FieldDescription, dest []any) *columnPlans {
	c := &columnPlans{oids: make([]uint32, len(fds)), formats: make([]int16, len(fds)),
		types: make([]reflect.Type, len(fds)), plans: make([]pgtype.ScanPlan, len(fds))}
	for i := range fds {
		c.oids[i], c.formats[i], c.types[i] = fds[i].DataTypeOID, fds[i].Format, reflect.TypeOf(dest[i])
		c.plans[i] = m.PlanScan(fds[i].DataTypeOID, fds[i].Format, dest[i])
	}
	return c
}

// scanPlans holds the columnPlans of the statements scanned with
// plannedRow, by statement name (a fixed set: the names of sql/*.sql).
var scanPlans sync.Map // statement name → *columnPlans

// plannedRow is a pgx.RowScanner: pass it alone to Scan, and it scans the
// row's columns into dest in order, with the scan plans kept for statement
// name instead of planning every column of every answer again (pgx plans
// per query). Answers whose columns or destinations differ from the kept
// plans' are planned afresh, and those plans kept. Errors are pgx's: a
// count mismatch, or a pgx.ScanArgError naming the column.
type plannedRow struct {
	name string
	dest []any
}

// ScanRow implements pgx.RowScanner (also through a pointer, which
// passes to Scan without a copy of its own).
func (p plannedRow) ScanRow(rows pgx.Rows) error {
	fds, values := rows.FieldDescriptions(), rows.RawValues()
	if len(fds) != len(p.dest) || len(values) != len(fds) {
		return fmt.Errorf("number of field descriptions must equal number of destinations, got %d and %d", len(fds), len(p.dest))
	}
	c, _ := scanPlans.Load(p.name)
	plans, _ := c.(*columnPlans)
	if plans == nil || !plans.fits(fds, p.dest) {
		plans = planColumns(rows.Conn().TypeMap(), fds, p.dest)
		scanPlans.Store(p.name, plans)
	}
	for i, d := range p.dest {
		if err := plans.plans[i].Scan(values[i], d); err != nil {
			return pgx.ScanArgError{ColumnIndex: i, FieldName: fds[i].Name, Err: err}
		}
	}
	return nil
}
