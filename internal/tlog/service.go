package tlog

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sagacity-go/sagacity/internal/service"
)

// The log's rhythm, as two services a server runs: the sequencer
// appends new entries and signs checkpoints as they fall due; the checker
// compares the database with the newest checkpoint, from the tree's
// stored nodes (cheap) and from every journal entry (full).
const (
	SequenceEvery  = 200 * time.Millisecond
	CheckEvery     = 30 * time.Second
	FullCheckEvery = 10 * time.Minute
)

// Sequencer runs Log.Sequence every Every (default SequenceEvery), and
// signs a last checkpoint when it is stopped: the log's shutdown.
type Sequencer struct {
	Log    *Log
	Every  time.Duration
	Logger *slog.Logger
	service.Base
}

// Start runs the sequencer until Stop or until ctx ends. A failure is
// logged once, and again only after a pass worked. Stop then signs a
// checkpoint covering everything written before it (as tessera's
// appender's shutdown does): what a stopped server wrote is proved outside
// the database at once, not only by the next start. That failing is
// logged too; the next start signs it.
func (s *Sequencer) Start(ctx context.Context) error {
	failing := false
	return s.Run(ctx, service.Work{
		Loops: []service.Loop{service.After(cmp.Or(s.Every, SequenceEvery), func(ctx context.Context) {
			_, err := s.Log.Sequence(ctx, false)
			if err != nil && !failing && ctx.Err() == nil {
				s.Logger.Warn("appending to the global log failed; trying again", "err", err)
			}
			failing = err != nil
		})},
		Final: func(ctx context.Context) {
			if _, err := s.Log.Sequence(ctx, true); err != nil {
				s.Logger.Warn("signing the last checkpoint failed; the next start signs it", "err", err)
			}
		},
	})
}

// Checker runs Log.Check: from the tree's nodes as it starts, in full at
// once and every FullEvery (default FullCheckEvery), from the tree's
// nodes every Every (default CheckEvery). It logs a halt, and the end of
// one, once.
type Checker struct {
	Log       *Log
	Every     time.Duration
	FullEvery time.Duration
	Logger    *slog.Logger
	service.Base
}

// Start checks the database against the newest checkpoint from the
// tree's nodes before it returns, so that a database rolled back behind
// it executes nothing from the first request on; then it checks in the
// background until Stop or until ctx ends, and has started once its
// first full check has run. Errors: Log.Check's when the first check
// cannot be made (Unavailable when the store is down).
func (c *Checker) Start(ctx context.Context) error {
	var halted string
	lastFull := time.Time{}
	return c.Run(ctx, service.Work{
		Setup: func(ctx context.Context) error {
			problem, err := c.Log.Check(ctx, false)
			if err != nil {
				return fmt.Errorf("checking the database against the newest checkpoint: %w", err)
			}
			if problem != "" {
				c.Logger.Error("executions halted", "problem", problem)
			}
			halted = c.Log.Halted()
			return nil
		},
		Loops: []service.Loop{service.Every(cmp.Or(c.Every, CheckEvery), func(ctx context.Context) {
			full := time.Since(lastFull) >= cmp.Or(c.FullEvery, FullCheckEvery)
			if _, err := c.Log.Check(ctx, full); err != nil {
				if ctx.Err() == nil {
					c.Logger.Warn("checking the database against the newest checkpoint failed; trying again", "err", err)
				}
			} else if full {
				lastFull = time.Now()
			}
			if now := c.Log.Halted(); now != halted {
				if now != "" {
					c.Logger.Error("executions halted", "problem", now)
				} else {
					c.Logger.Info("executions resumed: the database matches the newest checkpoint again")
				}
				halted = now
			}
		})},
	})
}
