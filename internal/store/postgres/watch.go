package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// Live events on PostgreSQL.
//
// Wake-ups cross replicas through LISTEN/NOTIFY, but the NOTIFY is never
// sent inside a writing transaction: PostgreSQL serialises the commits of
// transactions that notify (a database-wide lock at commit), which would
// undo the group commit of concurrent checkouts. Instead every successful
// write of this process pokes a notifier goroutine, which sends at most one
// `SELECT pg_notify(...)` in its own tiny transaction per notifyEvery
// (pokes that arrive meanwhile coalesce into the next one). Each process
// keeps one dedicated LISTEN connection (outside the pool) and wakes its
// WatchActivity channels on every notification, and also directly on its
// own writes. A notification lost to a crash between commit and notify is
// covered by the readers' periodic re-read.
//
// Ordering: activity ids come from an identity sequence and are taken at
// insert, but transactions commit in any order, so a reader can see id 11
// before id 10 is committed. ActivityAfter therefore scans ids in order
// across all companies and stops before a hole, unless the hole is known to
// be permanent (a rolled-back insert): no transaction is in progress, or the
// first row after the hole was written more than holeSettle ago (clasp's
// write transactions last milliseconds).
const (
	notifyEvery = 5 * time.Millisecond
	holeSettle  = 2 * time.Second
)

var _ store.ActivityStream = (*Driver)(nil)

// watch holds this process's WatchActivity channels, the notifier and the
// listener.
type watch struct {
	store.Broadcast               // the local WatchActivity channels
	poke            chan struct{} // a write committed: send a NOTIFY soon
	channel         string        // the LISTEN/NOTIFY channel name
	stop            context.CancelFunc
	done            sync.WaitGroup
}

// activityWritten is called after every successful write of this process:
// it wakes local watchers at once and asks the notifier to tell the other
// replicas.
func (s *Driver) activityWritten() {
	s.w.Notify()
	select {
	case s.w.poke <- struct{}{}:
	default:
	}
}

// startWatch starts the notifier and the listener (once, at Open).
func (s *Driver) startWatch(ctx context.Context, connCfg *pgx.ConnConfig) {
	s.w.poke = make(chan struct{}, 1)
	s.w.channel = "clasp_activity"
	if s.schema != "" {
		s.w.channel += "_" + s.schema
	}
	ctx, s.w.stop = context.WithCancel(context.WithoutCancel(ctx))
	s.w.done.Add(2)
	go func() {
		defer s.w.done.Done()
		s.notifier(ctx)
	}()
	go func() {
		defer s.w.done.Done()
		s.listener(ctx, connCfg)
	}()
}

// stopWatch stops the notifier and the listener and waits for them.
func (s *Driver) stopWatch() {
	if s.w.stop != nil {
		s.w.stop()
		s.w.done.Wait()
	}
}

// notifier sends one NOTIFY per burst of writes, at most one per notifyEvery.
func (s *Driver) notifier(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.w.poke:
		}
		if _, err := s.pool.Exec(ctx, "SELECT pg_notify($1, '')", s.w.channel); err != nil && ctx.Err() == nil {
			s.log.Warn("notify other replicas of new activity", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(notifyEvery):
		}
	}
}

// The listener's reconnect backoff: the first retry after a lost LISTEN
// connection waits listenRetryFirst, each failed attempt doubles the wait
// up to listenRetryMax.
const (
	listenRetryFirst = 100 * time.Millisecond
	listenRetryMax   = 5 * time.Second
)

// nextListenWait returns the wait before the next connection attempt of
// the listener, given the wait before the attempt that just ended and
// whether that attempt got as far as LISTEN: a connection that listened
// starts the backoff again from listenRetryFirst (a replica that lost its
// connection after hours of service reconnects as fast as after its
// first loss); one that did not doubles the wait, at most listenRetryMax.
func nextListenWait(prev time.Duration, listened bool) time.Duration {
	if listened || prev <= 0 {
		return listenRetryFirst
	}
	return min(2*prev, listenRetryMax)
}

// listener keeps a LISTEN connection open (reconnecting with the backoff
// of nextListenWait) and wakes the local watchers on every notification
// from any replica.
func (s *Driver) listener(ctx context.Context, cfg *pgx.ConnConfig) {
	var wait time.Duration
	for ctx.Err() == nil {
		listened, err := s.listenOnce(ctx, cfg)
		if ctx.Err() != nil {
			return
		}
		wait = nextListenWait(wait, listened)
		s.log.Warn("activity listener lost its connection; reconnecting", "err", err, "in", wait)
		s.w.Notify() // a notification may have been missed: readers look again
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// listenOnce connects, LISTENs on the store's channel and wakes the local
// watchers on each notification until the connection fails or ctx ends.
// It returns whether LISTEN succeeded, and the error that ended it.
func (s *Driver) listenOnce(ctx context.Context, cfg *pgx.ConnConfig) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.w.channel}.Sanitize()); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	s.w.Notify() // rows may have been written while not listening
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return true, fmt.Errorf("wait for notification: %w", err)
		}
		s.w.Notify()
	}
}

// WatchActivity implements store.ActivityStream: the channel receives a
// value after writes of any replica (see the comment at the top of this
// file) and is closed when ctx ends.
func (s *Driver) WatchActivity(ctx context.Context) <-chan struct{} {
	return s.w.Watch(ctx.Done())
}

// ActivityAfter implements store.ActivityStream (see the comment at the
// top of this file for how holes in the ids are handled).
func (s *Driver) ActivityAfter(ctx context.Context, companyID string, afterID int64, limit int) ([]*clasp.Activity, int64, error) {
	limit = store.PageLimit(limit)
	rows, err := s.pool.Query(ctx, q("ActivityAfter"), namedArgs{"after": afterID, "limit": limit, "settle": holeSettle.Seconds()})
	if err != nil {
		return nil, afterID, translate(fmt.Errorf("read activity after %d: %w", afterID, err))
	}
	defer rows.Close()
	through := afterID
	var out []*clasp.Activity
	for rows.Next() {
		var settled, quiet bool
		a, err := store.ScanActivityExtra(rows, &settled, &quiet)
		if err != nil {
			return nil, afterID, translate(fmt.Errorf("read activity after %d: %w", afterID, err))
		}
		if a.ID != through+1 && !settled && !quiet {
			break // a hole that an in-flight transaction may still fill
		}
		through = a.ID
		if a.CompanyID == companyID {
			out = append(out, a)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, afterID, translate(fmt.Errorf("read activity after %d: %w", afterID, err))
	}
	return out, through, nil
}

// ActivityLatestID implements store.ActivityStream.
func (s *Driver) ActivityLatestID(ctx context.Context, companyID string) (int64, error) {
	var id int64
	err := s.pool.QueryRow(ctx, q("ActivityLatestID"), namedArgs{"company": companyID}).Scan(&id)
	if err != nil {
		return 0, translate(fmt.Errorf("read latest activity id: %w", err))
	}
	return id, nil
}
