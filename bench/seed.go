package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store"
	"github.com/sagacity-go/sagacity/internal/tlog"
	"github.com/sagacity-go/sagacity/internal/witness"
	"github.com/sagacity-go/sagacity/wire"
)

// The SQLite stores the stream step checks hold streamSagas sagas each,
// whatever their size (sagas of 10 entries in a million, of 100 in ten
// million): the full check keeps each saga's last entry, so stores of one
// number of sagas show what the log's length alone costs it.
const (
	streamSagas = 100_000
	// streamVersion names what seedStore writes: change it when that, or
	// the schema it writes into, changes, and the next run seeds anew.
	streamVersion = 2
	seedChunk     = 50_000 // entries a transaction, then appended to the log
	seedRows      = 100    // rows a statement: 8 parameters a row
)

// streamStore is where the store of size entries is kept across runs.
func streamStore(size int) string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("sagacity-bench-stream-%d-v%d", size, streamVersion))
}

// ensureStore seeds the store of size entries unless it is there already.
func (b *bench) ensureStore(ctx context.Context, size int) (string, error) {
	dir := streamStore(size)
	if _, err := os.Stat(dir); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return dir, err
	}
	progress(b.start, "stream: seeding %s with %s entries (once: later runs reuse it)", dir, count(size))
	began := time.Now()
	if err := seedStore(ctx, dir, size, func(done int) {
		progress(b.start, "stream: %s of %s entries written and logged", count(done), count(size))
	}); err != nil {
		return "", fmt.Errorf("seeding %s: %w", dir, err)
	}
	progress(b.start, "stream: seeded in %s", time.Since(began).Round(time.Second))
	return dir, nil
}

// seedStore writes a new SQLite store of size logged entries, with a key
// of its own kept beside it (its log records the key and its checkpoint
// is signed with it), in a directory it renames to dir once the store is
// whole: an interrupted run leaves none behind. The entries go straight
// into the journal, sagas of size/streamSagas executed calls' chained
// entries a microsecond apart, each saga with its row; the log's own
// sequencer appends them a chunk at a time, as the server's keeps up, and
// signs one checkpoint at the end.
func seedStore(ctx context.Context, dir string, size int, done func(int)) error {
	perSaga := size / streamSagas
	if perSaga < 1 || size%streamSagas != 0 {
		return fmt.Errorf("a seeded store holds a multiple of %s entries, not %s", count(streamSagas), count(size))
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+"-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	skey, keys, err := newKeys()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "signer.key"), []byte(skey), 0o600); err != nil {
		return err
	}
	if err := fillStore(ctx, tmp, keys, size, perSaga, done); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// fillStore is seedStore's writing, into the directory dir.
func fillStore(ctx context.Context, dir string, keys *engine.Keys, size, perSaga int, done func(int)) error {
	path := filepath.Join(dir, "sagacity.db")
	db, err := store.OpenSQLite(ctx, path) // creates and migrates it
	if err != nil {
		return err
	}
	defer db.Close()
	w, err := witness.Open(filepath.Join(dir, "checkpoints"))
	if err != nil {
		return err
	}
	l := tlog.New(db, w, keys, tlog.Options{Every: int64(size), Interval: 24 * time.Hour}) // one checkpoint, at the end
	if err := l.Claim(ctx); err != nil {
		return err
	}
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return err
	}
	defer raw.Close()
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	prev := engine.ZeroHash
	for from := 0; from < size; from += seedChunk {
		tx, err := raw.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		var entries, sagas []any
		flush := func() error {
			if len(entries) > 0 {
				q := "INSERT INTO journal (saga_id, seq, tool_name, phase, input, payload, timestamp, hash) VALUES " + values(len(entries)/8, 8)
				if _, err := tx.ExecContext(ctx, q, entries...); err != nil {
					return err
				}
			}
			if len(sagas) > 0 {
				q := "INSERT INTO sagas (id, status, initiator, head_seq, head_hash, created_at, updated_at) VALUES " + values(len(sagas)/7, 7)
				if _, err := tx.ExecContext(ctx, q, sagas...); err != nil {
					return err
				}
			}
			entries, sagas = entries[:0], sagas[:0]
			return nil
		}
		for i := from; i < min(size, from+seedChunk); i++ {
			e := engine.Entry{SagaID: fmt.Sprintf("s-%06d", i/perSaga), Seq: int64(i%perSaga + 1), ToolName: toolExecuted,
				Phase: engine.PhaseExecuted, Input: callInput, Payload: "ok", Timestamp: epoch.Add(time.Duration(i) * time.Microsecond)}
			if e.Seq == 1 {
				prev = engine.ZeroHash
			}
			e.Hash = engine.Hash(prev, e)
			prev = e.Hash
			entries = append(entries, e.SagaID, e.Seq, e.ToolName, string(e.Phase), e.Input, e.Payload, e.Timestamp.UnixMicro(), e.Hash)
			if e.Seq == int64(perSaga) {
				sagas = append(sagas, e.SagaID, string(wire.Completed), agent.ID, e.Seq, e.Hash, epoch.UnixMicro(), e.Timestamp.UnixMicro())
			}
			if len(entries) == 8*seedRows {
				if err := flush(); err != nil {
					_ = tx.Rollback()
					return err
				}
			}
		}
		if err := flush(); err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		if _, err := l.Sequence(ctx, false); err != nil {
			return err
		}
		if n := min(size, from+seedChunk); n*10/size > from*10/size {
			done(n) // a tenth more
		}
	}
	st, err := l.Sequence(ctx, true)
	if err == nil && st.Size != int64(size) {
		err = fmt.Errorf("the seeded log holds %d leaves, want %d", st.Size, size)
	}
	return err
}

// values is n rows of k ? placeholders, for a multi-row INSERT.
func values(n, k int) string {
	row := "(?" + strings.Repeat(", ?", k-1) + ")"
	return row + strings.Repeat(", "+row, n-1)
}
