package apitest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
)

// Proxy is a validating reverse proxy, as Prism is one: it forwards to a
// server, and holds every request and answer that passes through it to
// the document.
type Proxy struct {
	*httptest.Server
	mu   sync.Mutex
	errs []error
}

type bodyKey struct{}

// NewProxy starts a proxy to target (a base URL); Close stops it.
func NewProxy(target string) (*Proxy, error) {
	c, err := Load()
	if err != nil {
		return nil, err
	}
	to, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	p := &Proxy{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(to)
			r.Out.Host = r.In.Host
		},
		ModifyResponse: func(resp *http.Response) error {
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			resp.Body = io.NopCloser(bytes.NewReader(body))
			req := resp.Request
			if !c.Holds(req.Method, req.URL.Path) {
				return nil
			}
			reqBody, _ := req.Context().Value(bodyKey{}).([]byte)
			checked := *resp
			if err := c.Check(req, reqBody, &checked, body); err != nil {
				p.mu.Lock()
				p.errs = append(p.errs, fmt.Errorf("%s %s answered %d %.300q: %w", req.Method, req.URL.RequestURI(), resp.StatusCode, body, err))
				p.mu.Unlock()
			}
			resp.Body = io.NopCloser(bytes.NewReader(body))
			return nil
		},
	}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), bodyKey{}, body)))
	}))
	return p, nil
}

// Errors lists how the traffic so far departed from the document.
func (p *Proxy) Errors() []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]error(nil), p.errs...)
}
