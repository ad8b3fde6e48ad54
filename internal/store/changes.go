package store

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// Changes: an Update that changed a saga's pending request says so with
// Tx.Wake, and Listen tells of it once it committed. PostgreSQL carries
// it across processes with NOTIFY, which the database delivers at
// commit and drops with a rollback; SQLite, whose database one process
// writes, tells its own listeners after the commit.

// changesChannel is the PostgreSQL channel of the changes of the store,
// as SQL: a channel is the database's, so its name has the store's
// schema in it (hashed when too long for a name), and two stores in two
// schemas of one database do not hear each other. The payload is the
// saga's id.
const changesChannel = `CASE WHEN octet_length(current_schema()) > 45 THEN 'sagacity_requests.' || md5(current_schema())
	ELSE 'sagacity_requests.' || current_schema() END`

// listenRetry bounds how long Listen waits before it connects again.
const listenRetry = 5 * time.Second

// Wake queues a change of the saga's requests, told once the
// transaction commits.
func (t *tx) Wake(sagaID string) error {
	if t.postgres {
		return mapErr(t.c.queue(t.ctx, "SELECT pg_notify("+changesChannel+", $1)", sagaID))
	}
	if t.woke != nil {
		*t.woke = append(*t.woke, sagaID)
	}
	return nil
}

func (r *recorder) Wake(sagaID string) error {
	return r.write(func(t engine.Tx) error { return t.Wake(sagaID) })
}

// listeners are the functions SQLite's Listen told to tell.
type listeners struct {
	mu sync.Mutex
	fs map[*func(string)]struct{}
}

// tell tells every listener of the sagas whose requests changed.
func (l *listeners) tell(sagaIDs []string) {
	if len(sagaIDs) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for f := range l.fs {
		for _, id := range sagaIDs {
			(*f)(id)
		}
	}
}

// Listen calls changed with the id of each saga whose requests an
// Update changed (Tx.Wake), once that Update committed, and with "" when
// it starts listening and whenever it may have missed some: a listener
// reads again whatever it waits on. It returns when ctx ends.
func (s *sqlStore) Listen(ctx context.Context, changed func(sagaID string)) error {
	if s.postgres {
		return listenPostgres(ctx, s.pool, changed)
	}
	f := &changed
	s.heard.mu.Lock()
	if s.heard.fs == nil {
		s.heard.fs = map[*func(string)]struct{}{}
	}
	s.heard.fs[f] = struct{}{}
	s.heard.mu.Unlock()
	changed("")
	<-ctx.Done()
	s.heard.mu.Lock()
	delete(s.heard.fs, f)
	s.heard.mu.Unlock()
	return nil
}

// listenPostgres listens on a connection of its own, outside the pool,
// and connects again when it is lost, telling "" each time it listens
// anew (what was committed meanwhile was not heard).
func listenPostgres(ctx context.Context, pool *pgxpool.Pool, changed func(string)) error {
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := listenOnce(ctx, pool, func(id string) {
			wait = 100 * time.Millisecond
			changed(id)
		})
		if ctx.Err() != nil {
			break
		}
		_ = err // the connection was lost: connect again, and tell "" then
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
		wait = min(2*wait, listenRetry)
	}
	return nil
}

// listenOnce connects, listens and tells until the connection fails or
// ctx ends.
func listenOnce(ctx context.Context, pool *pgxpool.Pool, changed func(string)) error {
	c, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	var channel string
	if err := c.QueryRow(ctx, "SELECT "+changesChannel).Scan(&channel); err != nil {
		return err
	}
	if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	changed("")
	for {
		n, err := c.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		changed(n.Payload)
	}
}
