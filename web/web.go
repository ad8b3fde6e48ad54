// Package web holds the console's static files, embedded in the binary:
// htmx (from the npm package htmx.org, version in static/VERSIONS) and the
// stylesheet. Templates live in web/templates.
package web

import "embed"

// Static is served under /static/.
//
//go:embed static
var Static embed.FS
