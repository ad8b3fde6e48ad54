package server

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sagacity-go/sagacity/internal/auth"
	"golang.org/x/time/rate"
)

// limiter hands out a token bucket per key (a client IP or a principal).
type limiter struct {
	every time.Duration
	burst int
	mu    sync.Mutex
	m     map[string]*rate.Limiter
}

func newLimiter(perMinute, burst int) *limiter {
	return &limiter{every: time.Minute / time.Duration(perMinute), burst: burst, m: map[string]*rate.Limiter{}}
}

// maxKeys bounds the limiter's memory; full buckets are dropped first.
const maxKeys = 10000

// allow takes a token for key, or says how long until one is free.
func (l *limiter) allow(key string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.m[key]
	if !ok {
		if len(l.m) >= maxKeys {
			for k, v := range l.m {
				if v.Tokens() >= float64(l.burst) {
					delete(l.m, k)
				}
			}
		}
		lim = rate.NewLimiter(rate.Every(l.every), l.burst)
		l.m[key] = lim
	}
	res := lim.Reserve()
	if d := res.Delay(); d > 0 {
		res.Cancel()
		return false, d
	}
	return true, 0
}

// clientIP is the peer's address. X-Forwarded-For is not trusted: behind
// a proxy every client shares the proxy's budget.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// limit answers 429 with Retry-After once a client IP, and (when the
// request is authenticated) its principal, spends its budget.
func (s *server) limit(byIP, byPrincipal *limiter) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ok, wait := byIP.allow(clientIP(r))
			if ok && byPrincipal != nil {
				if p := auth.From(r.Context()); p.ID != "" && !p.Anonymous {
					ok, wait = byPrincipal.allow(p.ID)
				}
			}
			if !ok {
				w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
				s.Log.WarnContext(r.Context(), "rate limited", "path", r.URL.Path)
				s.fail(w, r, errTooMany)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
