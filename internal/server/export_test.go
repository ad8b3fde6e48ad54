package server

import "github.com/go-chi/chi/v5"

// Routes is the route table New serves o with, for tests that walk it.
func Routes(o Options) chi.Routes { return (&server{o}).routes() }
