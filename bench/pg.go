package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// databases makes fresh PostgreSQL databases on one server and drops them
// all at the end of the run, so every figure starts from an empty store
// and nothing is left behind.
type databases struct {
	base   string // the url of an existing database to connect to
	prefix string // unique to this run
	mu     sync.Mutex
	made   []string
}

func newDatabases(base string) *databases {
	return &databases{base: base, prefix: "sagacity_bench_" + strings.ToLower(rand.Text()[:8])}
}

// fresh creates an empty database and returns its url.
func (d *databases) fresh(ctx context.Context, what string) (string, error) {
	name := d.prefix + "_" + what
	if err := d.exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	d.mu.Lock()
	d.made = append(d.made, name)
	d.mu.Unlock()
	u, err := url.Parse(d.base)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// dropAll drops every database fresh made, closing what is still
// connected to them (WITH FORCE: a server or pool that did not stop
// cleanly must not keep its database alive).
func (d *databases) dropAll(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var first error
	for _, name := range d.made {
		if err := d.exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil && first == nil {
			first = err
		}
	}
	d.made = nil
	return first
}

func (d *databases) exec(ctx context.Context, sql string) error {
	c, err := pgx.Connect(ctx, d.base)
	if err != nil {
		return fmt.Errorf("PostgreSQL at %s: %w", d.base, err)
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql)
	return err
}

// serverVersion is what SELECT version() says.
func serverVersion(ctx context.Context, dbURL string) (string, error) {
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return "", err
	}
	defer c.Close(ctx)
	var v string
	err = c.QueryRow(ctx, "SELECT version()").Scan(&v)
	return v, err
}

// floor is the least a durable write costs on this PostgreSQL: autocommit
// single-row INSERTs, one connection per worker, each INSERT one round
// trip and one commit (pgx prepares the statement once per connection).
type floor struct {
	conns []*pgx.Conn
}

func newFloor(ctx context.Context, dbURL string, workers int) (*floor, error) {
	f := &floor{}
	for range workers {
		c, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			f.close(ctx)
			return nil, err
		}
		f.conns = append(f.conns, c)
	}
	_, err := f.conns[0].Exec(ctx, "CREATE TABLE floor (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL)")
	return f, err
}

// inserts makes n INSERT+COMMITs on worker w's connection.
func (f *floor) inserts(ctx context.Context, w, n int) error {
	for range n {
		if _, err := f.conns[w].Exec(ctx, "INSERT INTO floor (v) VALUES ($1)", `{"item":"laptop"}`); err != nil {
			return err
		}
	}
	return nil
}

func (f *floor) close(ctx context.Context) {
	for _, c := range f.conns {
		c.Close(ctx)
	}
}
