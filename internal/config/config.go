// Package config reads the server's settings from SAGACITY_* environment
// variables. A wrong setting stops start-up with an error naming it.
package config

import (
	"fmt"
	"net"
)

// Config is the server's settings.
type Config struct {
	Addr        string // SAGACITY_ADDR, host:port to listen on
	DatabaseURL string // SAGACITY_DATABASE_URL, postgres://… or sqlite:<path>
}

// Defaults for a local run: loopback, the embedded store.
const (
	DefaultAddr        = "127.0.0.1:8080"
	DefaultDatabaseURL = "sqlite:sagacity.db"
)

// Load reads the settings through getenv.
func Load(getenv func(string) string) (Config, error) {
	c := Config{Addr: or(getenv("SAGACITY_ADDR"), DefaultAddr), DatabaseURL: or(getenv("SAGACITY_DATABASE_URL"), DefaultDatabaseURL)}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return Config{}, fmt.Errorf("SAGACITY_ADDR: %q is not host:port: %w", c.Addr, err)
	}
	return c, nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
