package server

import (
	"context"
	"log/slog"

	"github.com/go-chi/chi/v5"
)

// requestInfo is what every line logged about a request says of it,
// filled in as the request is served: its id at once, the principal once
// authenticated, the saga and seq once routed (from the route's
// parameters, never the query).
type requestInfo struct {
	id        string
	principal string
	route     *chi.Context // the router fills it in: observe hands it down
	group     int          // the route group that took it (see inGroup)
}

type requestKey struct{}

func infoFrom(ctx context.Context) *requestInfo {
	in, _ := ctx.Value(requestKey{}).(*requestInfo)
	return in
}

func requestID(ctx context.Context) string {
	if in := infoFrom(ctx); in != nil {
		return in.id
	}
	return ""
}

// withRequest logs, with each line logged with a request's context, the
// request's id, principal, saga and seq, where it has them.
type withRequest struct{ slog.Handler }

func (h withRequest) Handle(ctx context.Context, r slog.Record) error {
	if in := infoFrom(ctx); in != nil {
		r.AddAttrs(slog.String("request", in.id))
		if in.principal != "" {
			r.AddAttrs(slog.String("principal", in.principal))
		}
		if saga := in.route.URLParam("sagaId"); saga != "" {
			r.AddAttrs(slog.String("saga", saga))
		}
		if seq := in.route.URLParam("seq"); seq != "" {
			r.AddAttrs(slog.String("seq", seq))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h withRequest) WithAttrs(as []slog.Attr) slog.Handler {
	return withRequest{h.Handler.WithAttrs(as)}
}

func (h withRequest) WithGroup(name string) slog.Handler {
	return withRequest{h.Handler.WithGroup(name)}
}
