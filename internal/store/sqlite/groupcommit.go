package sqlite

// Group commit. Every write of the store goes through
// Store.write, which hands its function to the single writer connection.
// With synchronous=FULL each COMMIT costs an fsync of the WAL, so one
// transaction per request caps writes at the disk's fsync rate. Instead,
// the writes that arrive while a commit is in flight queue up, and the next
// commit takes them all (at most maxBatch, oldest first) in one shared
// BEGIN IMMEDIATE ... COMMIT:
//
//	BEGIN IMMEDIATE
//	SAVEPOINT w; <request 1>; RELEASE w      -- or ROLLBACK TO w; RELEASE w when its fn fails
//	SAVEPOINT w; <request 2>; RELEASE w
//	...
//	COMMIT                                   -- one fsync for the whole batch
//
// Each request stays all-or-nothing: its work is under its own savepoint,
// and a request whose function fails is rolled back to that savepoint
// without touching the others. No request is answered before the shared
// COMMIT has returned (durable on disk with synchronous=FULL); if the
// COMMIT fails, every request of the batch gets the error.
//
// There is no background goroutine and no timer. The first request that
// finds the writer idle leads at once, on its own goroutine, so a lone
// request commits alone with no added latency and no savepoint. Requests
// that find it busy wait in a FIFO queue; when a leader has answered its
// batch it hands the lead to the oldest waiting request, which takes the
// queue's head as its batch. So every request waits at most for the batch
// in flight plus ceil(position/maxBatch) batches (fairness), and batches
// grow only as fast as requests arrive during a commit.
//
// Cancellation: a request whose context ends while it waits in the queue
// leaves the queue and returns the context's error; its function never
// runs. Once taken into a batch, a request whose context has ended is
// skipped (answered with the context's error). A statement, once started,
// runs to its end whatever happens to the context (see wtx.stmt): SQLite
// answers an interrupted write inside a transaction by rolling back the
// whole transaction, which would undo the other requests of the batch. The
// next statement of a canceled request fails instead, and the request is
// rolled back to its savepoint.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/clasp-dev/clasp"
)

// maxBatch bounds the write requests that share one commit.
const maxBatch = 64

// writeReq is one call of Store.write waiting for, or in, a batch.
type writeReq struct {
	ctx  context.Context
	fn   func(tx *wtx) error
	wake chan struct{} // receives one value: answered, or (lead set) lead the next batch

	// Set by the leader before the value on wake.
	err           error
	lead          bool // this request leads the next batch
	panicked      bool // fn panicked with panicValue: re-raised on the caller's goroutine
	panicValue    any
	wroteActivity bool

	taken bool // under committer.mu: out of the queue (in a batch, or leading)
}

// committer is the writer's queue, its savepoint statements and its counters.
type committer struct {
	mu    sync.Mutex
	busy  bool        // a leader is running a batch
	queue []*writeReq // waiting requests, oldest first

	sp [numSavepointOps]*sql.Stmt // prepared on the writer by prepareSavepoints

	writes  atomic.Int64 // requests whose work was committed
	commits atomic.Int64 // successful COMMITs
}

// Savepoint statements of a batch, prepared once (parsing them for every
// request would cost the writer, the serial part, a few microseconds each).
const (
	spBegin    = iota // SAVEPOINT w
	spRelease         // RELEASE w
	spRollback        // ROLLBACK TO w
	numSavepointOps
)

var savepointSQL = [numSavepointOps]string{spBegin: "SAVEPOINT w", spRelease: "RELEASE w", spRollback: "ROLLBACK TO w"}

// prepareSavepoints prepares the savepoint statements on the writer.
func (s *Driver) prepareSavepoints(ctx context.Context) error {
	for i, text := range savepointSQL {
		st, err := s.w.PrepareContext(ctx, text)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", text, err)
		}
		s.gc.sp[i] = st
	}
	return nil
}

// WriteStats counts the store's writes since Open (for clasp bench and
// tests): how many write requests were committed and in how many
// transactions. Writes/Commits is the mean group-commit batch size.
type WriteStats struct {
	Writes  int64 // write requests (store calls that write) whose work was committed
	Commits int64 // COMMITs that succeeded: one WAL fsync each with synchronous=FULL
}

// WriteStats returns the write counters.
func (s *Driver) WriteStats() WriteStats {
	return WriteStats{Writes: s.gc.writes.Load(), Commits: s.gc.commits.Load()}
}

// write runs fn in a write transaction on the writer connection and returns
// once fn's work is committed (nil) or undone (fn's error translated, see
// translate). fn may share its transaction with other callers' functions
// (group commit, see the top of this file) but sees only its own effects
// and those committed before or batched ahead of it; it touches the
// database only through tx. Errors also: the context's error if ctx ends
// before fn runs; the COMMIT's error, translated, for every request of a
// batch whose COMMIT fails. A panic in fn is re-raised here, after the
// other requests of its batch are answered.
func (s *Driver) write(ctx context.Context, fn func(tx *wtx) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("begin write transaction: %w", err)
	}
	r := &writeReq{ctx: ctx, fn: fn, wake: make(chan struct{}, 1)}
	c := &s.gc
	c.mu.Lock()
	if !c.busy {
		c.busy = true
		r.taken = true
		c.mu.Unlock()
		s.lead(r)
	} else {
		c.queue = append(c.queue, r)
		c.mu.Unlock()
		select {
		case <-r.wake:
		case <-ctx.Done():
			c.mu.Lock()
			if !r.taken {
				c.remove(r)
				c.mu.Unlock()
				return fmt.Errorf("wait for the writer: %w", ctx.Err())
			}
			c.mu.Unlock()
			<-r.wake // in a batch already, or about to lead: wait for it
		}
		if r.lead {
			s.lead(r)
		}
	}
	if r.panicked {
		panic(r.panicValue)
	}
	return r.err
}

// remove drops r from the queue. c.mu must be held.
func (c *committer) remove(r *writeReq) {
	for i, q := range c.queue {
		if q == r {
			copy(c.queue[i:], c.queue[i+1:])
			c.queue[len(c.queue)-1] = nil
			c.queue = c.queue[:len(c.queue)-1]
			return
		}
	}
}

// lead runs a batch led by first: first plus the oldest waiting requests,
// at most maxBatch in all. It answers them, then hands the lead to the
// oldest request still waiting (or marks the writer idle). Runs on first's
// goroutine; first is answered by its fields when lead returns.
func (s *Driver) lead(first *writeReq) {
	c := &s.gc
	c.mu.Lock()
	n := min(len(c.queue), maxBatch-1)
	batch := make([]*writeReq, 1, n+1)
	batch[0] = first
	for _, r := range c.queue[:n] {
		r.taken = true
		batch = append(batch, r)
	}
	clear(c.queue[:n]) // the backing array outlives them
	c.queue = c.queue[n:]
	c.mu.Unlock()

	for rest := batch; len(rest) > 0; {
		rest = s.commitBatch(rest)
	}
	s.noteDiskFull(batch)

	c.mu.Lock()
	var next *writeReq
	if len(c.queue) > 0 {
		next = c.queue[0]
		next.taken = true
		c.queue[0] = nil
		c.queue = c.queue[1:]
	} else {
		c.busy = false
		c.queue = c.queue[:0:0] // let the drained backing array go
	}
	c.mu.Unlock()

	// The writer goes on with the next batch while this one is answered.
	if next != nil {
		next.lead = true
		next.wake <- struct{}{}
	}
	for _, r := range batch[1:] {
		r.wake <- struct{}{}
	}
}

// commitBatch runs the requests of batch in one transaction and commits
// it, setting each request's err. If the transaction itself breaks before
// the end (SQLite rolled it back after an I/O error, say), the requests
// already run are answered with that error and the ones not yet run are
// returned, to go into a fresh transaction; otherwise it returns nil.
func (s *Driver) commitBatch(batch []*writeReq) (rest []*writeReq) {
	c := &s.gc
	// The transaction is the batch's, not any one caller's: it is never
	// canceled (database/sql would roll it back when that caller gives up).
	t, err := s.w.BeginTx(context.Background(), nil)
	if err != nil {
		err = translate(fmt.Errorf("begin write transaction: %w", err))
		for _, r := range batch {
			r.err = err
		}
		return nil
	}
	b := &txBatch{tx: t, stmts: map[string]*sql.Stmt{}}
	savepoint := func(op int) error {
		st := b.sp[op]
		if st == nil {
			st = t.Stmt(s.gc.sp[op])
			b.sp[op] = st
		}
		_, err := st.Exec()
		return err
	}
	single := len(batch) == 1 // a lone request needs no savepoint: its transaction is its own
	done := make([]*writeReq, 0, len(batch))
	var unavail error // the last 503 a request's fn failed with (disk full, busy)
	broken := func(i int, cause error) []*writeReq {
		_ = t.Rollback()
		err := translate(fmt.Errorf("shared write transaction: %w", cause))
		if clasp.AsError(err) == nil && unavail != nil {
			// SQLite rolled the whole transaction back after that error
			// (it may on SQLITE_FULL), so the savepoint is gone: the same
			// cause undid the requests already run.
			err = unavail
		}
		for _, r := range done {
			r.err = err
		}
		return batch[i:]
	}
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = fmt.Errorf("begin write transaction: %w", err)
			continue
		}
		if !single {
			if err := savepoint(spBegin); err != nil {
				return broken(i, fmt.Errorf("savepoint: %w", err))
			}
		}
		tx := &wtx{b: b, s: s, now: micros(s.now())}
		if err := runFn(r, tx); err != nil {
			r.err = translate(err)
			if clasp.ErrorCode(r.err) == clasp.CodeUnavailable {
				unavail = r.err
			}
			if single {
				_ = t.Rollback()
				return nil
			}
			if err := savepoint(spRollback); err != nil {
				return broken(i+1, fmt.Errorf("roll back to savepoint: %w", err))
			}
			if err := savepoint(spRelease); err != nil {
				return broken(i+1, fmt.Errorf("release savepoint: %w", err))
			}
			continue
		}
		if !single {
			if err := savepoint(spRelease); err != nil {
				r.err = translate(fmt.Errorf("release savepoint: %w", err))
				return broken(i+1, err)
			}
		}
		r.wroteActivity = tx.wroteActivity
		done = append(done, r)
	}
	if len(done) == 0 {
		_ = t.Rollback()
		return nil
	}
	if err := t.Commit(); err != nil {
		// A COMMIT that fails may leave SQLite's transaction open on the
		// connection (database/sql has let go of it): end it, best effort.
		_, _ = s.w.Exec("ROLLBACK")
		err = translate(fmt.Errorf("commit: %w", err))
		for _, r := range done {
			r.err = err
		}
		return nil
	}
	c.commits.Add(1)
	c.writes.Add(int64(len(done)))
	for _, r := range done {
		if r.wroteActivity {
			s.watch.Notify() // after the commit that made the rows visible
			break
		}
	}
	return nil
}

// runFn calls r.fn, turning a panic into an error for the batch (the
// request is rolled back) and a panic re-raised by r's caller.
func runFn(r *writeReq, tx *wtx) (err error) {
	defer func() {
		if v := recover(); v != nil {
			r.panicked, r.panicValue = true, v
			err = errPanicked
		}
	}()
	return r.fn(tx)
}

var errPanicked = errors.New("write function panicked")

// txBatch is the shared transaction of a batch and its statements, bound
// to the transaction once each and reused by every request of the batch.
type txBatch struct {
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
	sp    [numSavepointOps]*sql.Stmt
}
