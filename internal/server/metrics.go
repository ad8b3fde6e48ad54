package server

import (
	"net/http"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// Metrics is what the server needs of its metrics (internal/metrics).
type Metrics interface {
	http.Handler // serves them
	// Instrument records each request under its route's pattern; it
	// runs inside the router.
	Instrument(next http.Handler) http.Handler
}

// metrics serves the metrics to a caller the engine lets read them.
func (s *server) metrics(w http.ResponseWriter, r *http.Request) error {
	if err := s.API.Engine.Can(auth.From(r.Context()), engine.ActMetrics, engine.Subject{}); err != nil {
		return err
	}
	s.Metrics.ServeHTTP(w, r)
	return nil
}
