package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// MCP tasks: an agent that calls a gated tool as a task polls tasks/get
// while people decide. The server keeps nothing per task (its id names
// the saga and the request), so what a poll costs the database should
// not grow with how many tasks are open: tasks/get at tasksRate a second
// is measured with 100 tasks open and again with 1,000, each task in a
// saga of its own, and what PostgreSQL did per poll is read from
// pg_stat_database.

// tasksResult is one measurement.
type tasksResult struct {
	open                   int
	polls                  int
	p50, p99               time.Duration
	tuples, blocks, xacts  float64 // per tasks/get, from pg_stat_database
	ratioTuples, ratioBlks float64 // over the first measurement's
}

const (
	tasksRate = 100 // tasks/get a second
	tasksFor  = 10 * time.Second
	// statsFlush is how long an idle backend may keep its statistics
	// before PostgreSQL counts them in pg_stat_database (10 s in 15).
	statsFlush = 11 * time.Second
)

// mcpClient speaks JSON-RPC to /mcp in one session.
type mcpClient struct {
	url, token, session string
	c                   *http.Client
	id                  atomic.Int64
}

// rpc sends one request and returns its result, or its error's message.
func (m *mcpClient) rpc(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := m.id.Add(1)
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	resp, err := m.post(ctx, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if m.session == "" {
		m.session = resp.Header.Get("Mcp-Session-Id")
	}
	var msg struct {
		ID     int64           `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	read := func(b []byte) (bool, error) {
		if err := json.Unmarshal(b, &msg); err != nil || msg.ID != id {
			return false, nil //nolint:nilerr // another message of the stream
		}
		if msg.Error != nil {
			return true, fmt.Errorf("%s: %s", method, msg.Error.Message)
		}
		return true, nil
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		if done, err := read(b); !done {
			return nil, errors.Join(err, fmt.Errorf("%s: %d %s", method, resp.StatusCode, b))
		} else if err != nil {
			return nil, err
		}
		return msg.Result, nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if done, err := read([]byte(data)); done {
				return msg.Result, err
			}
		}
	}
	return nil, errors.Join(sc.Err(), fmt.Errorf("%s: the stream ended without its answer", method))
}

func (m *mcpClient) post(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.url+"/mcp", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+m.token)
	if m.session != "" {
		req.Header.Set("Mcp-Session-Id", m.session)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	return m.c.Do(req)
}

// open starts a session that asks for tasks.
func (m *mcpClient) open(ctx context.Context) error {
	if _, err := m.rpc(ctx, "initialize", map[string]any{"protocolVersion": "2025-11-25",
		"capabilities": map[string]any{"tasks": map[string]any{}}, "clientInfo": map[string]any{"name": "bench", "version": "1"}}); err != nil {
		return err
	}
	resp, err := m.post(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// task calls the gated tool as a task in saga saga, and returns its id.
func (m *mcpClient) task(ctx context.Context, saga string, i int) (string, error) {
	res, err := m.rpc(ctx, "tools/call", map[string]any{"name": toolGated,
		"arguments": map[string]any{"amount": fmt.Sprint(i + 1), "to": "tasks"},
		"task":      map[string]any{"ttl": 3_600_000}, "_meta": map[string]any{"sagacity/saga": saga}})
	if err != nil {
		return "", err
	}
	var r struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.Task.TaskID == "" {
		return "", errors.Join(err, fmt.Errorf("tools/call as a task answered %s", res))
	}
	return r.Task.TaskID, nil
}

// dbStats is what pg_stat_database has counted of the database.
type dbStats struct{ tuples, blocks, xacts int64 }

func statsOf(ctx context.Context, dbURL string) (dbStats, error) {
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return dbStats{}, err
	}
	defer c.Close(ctx)
	var s dbStats
	err = c.QueryRow(ctx, `SELECT tup_returned + tup_fetched, blks_hit + blks_read, xact_commit + xact_rollback
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&s.tuples, &s.blocks, &s.xacts)
	return s, err
}

// tasksStep measures tasks/get with 100 and with 1,000 tasks open.
func (b *bench) tasksStep(ctx context.Context) error {
	bin, err := b.binary(ctx)
	if err != nil {
		return err
	}
	dbURL, err := b.dbs.fresh(ctx, "tasks")
	if err != nil {
		return err
	}
	secret := "bench-tool-signing-secret-" + rand.Text()
	tools := wireServer([]byte(secret))
	defer tools.Close()
	agent, auditor := "sgc_"+rand.Text(), "sgc_"+rand.Text()
	dir, err := os.MkdirTemp(b.tmp, "tasks-")
	if err != nil {
		return err
	}
	config := filepath.Join(dir, "sagacity.yaml")
	// An approver the rules can count on (a server refuses a quorum its
	// tokens can never meet), who decides nothing here.
	approver := "sgc_" + rand.Text()
	if err := os.WriteFile(config, []byte(heldConfig(tools.URL, agent, auditor, []string{approver})), 0o600); err != nil {
		return err
	}
	skey, _, err := engine.GenerateKeys("sagacity.bench")
	if err != nil {
		return err
	}
	s, err := launch(ctx, bin, serverEnv(dbURL, config, secret, skey, filepath.Join(dir, "checkpoints")))
	if err != nil {
		return err
	}
	defer s.stop()
	m := &mcpClient{url: s.url, token: agent, c: &http.Client{Timeout: time.Minute}}
	if err := m.open(ctx); err != nil {
		return err
	}
	var ids []string
	for _, open := range []int{100, 1000} {
		progress(b.start, "MCP tasks: %d open, tasks/get at %d/s for %s", open, tasksRate, tasksFor)
		for i := len(ids); i < open; i++ {
			id, err := m.task(ctx, fmt.Sprintf("task-%d", i), i)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		// What the server does meanwhile by itself (the sequencer, the
		// sweeps, the heartbeat), over as long with no poll, is taken
		// off what the polls' seconds counted.
		time.Sleep(statsFlush) // the statistics of what opened them flushed
		idle, err := statsOf(ctx, dbURL)
		if err != nil {
			return err
		}
		time.Sleep(tasksFor)
		time.Sleep(statsFlush)
		before, err := statsOf(ctx, dbURL)
		if err != nil {
			return err
		}
		var lat []time.Duration
		tick := time.NewTicker(time.Second / tasksRate)
		for i := range int(tasksFor / time.Second * tasksRate) {
			<-tick.C
			t := time.Now()
			if _, err := m.rpc(ctx, "tasks/get", map[string]any{"taskId": ids[(i*7919)%len(ids)]}); err != nil {
				tick.Stop()
				return err
			}
			lat = append(lat, time.Since(t))
		}
		tick.Stop()
		time.Sleep(statsFlush)
		after, err := statsOf(ctx, dbURL)
		if err != nil {
			return err
		}
		slices.Sort(lat)
		n := float64(len(lat))
		// The idle window ends with one more flush than the polls' (the
		// same length of the server's own work either way).
		own := dbStats{before.tuples - idle.tuples, before.blocks - idle.blocks, before.xacts - idle.xacts}
		r := tasksResult{open: open, polls: len(lat), p50: lat[len(lat)/2], p99: lat[min(len(lat)-1, len(lat)*99/100)],
			tuples: float64(after.tuples-before.tuples-own.tuples) / n, blocks: float64(after.blocks-before.blocks-own.blocks) / n,
			xacts: float64(after.xacts-before.xacts-own.xacts) / n}
		if len(b.r.tasks) > 0 {
			first := b.r.tasks[0]
			r.ratioTuples, r.ratioBlks = r.tuples/first.tuples, r.blocks/first.blocks
		}
		b.r.tasks = append(b.r.tasks, r)
	}
	return nil
}
