package tlog

import (
	"cmp"
	"context"
	"log/slog"
	"time"
)

// The log's rhythm, as two services a server starts: the sequencer
// appends new entries and signs checkpoints as they fall due; the checker
// compares the database with the newest checkpoint, from the tree's
// stored nodes (cheap) and from every journal entry (full).
const (
	SequenceEvery  = 200 * time.Millisecond
	CheckEvery     = 30 * time.Second
	FullCheckEvery = 10 * time.Minute
)

// Sequencer runs Log.Sequence every Every (default SequenceEvery).
type Sequencer struct {
	Log    *Log
	Every  time.Duration
	Logger *slog.Logger
}

// Start runs the sequencer until ctx ends; done is closed once it has
// stopped. A failure is logged once, and again only after a pass worked.
func (s Sequencer) Start(ctx context.Context) (done <-chan struct{}) {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(cmp.Or(s.Every, SequenceEvery))
		defer t.Stop()
		failing := false
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			_, err := s.Log.Sequence(ctx, false)
			if err != nil && !failing && ctx.Err() == nil {
				s.Logger.Warn("appending to the global log failed; trying again", "err", err)
			}
			failing = err != nil
		}
	}()
	return stopped
}

// Checker runs Log.Check: in full at once and every FullEvery (default
// FullCheckEvery), from the tree's nodes every Every (default
// CheckEvery). It logs a halt, and the end of one, once.
type Checker struct {
	Log       *Log
	Every     time.Duration
	FullEvery time.Duration
	Logger    *slog.Logger
}

// Start runs the checker until ctx ends; done is closed once it has
// stopped.
func (c Checker) Start(ctx context.Context) (done <-chan struct{}) {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(cmp.Or(c.Every, CheckEvery))
		defer t.Stop()
		halted, lastFull := c.Log.Halted(), time.Time{}
		for {
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
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return stopped
}
