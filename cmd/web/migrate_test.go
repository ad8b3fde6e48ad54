package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/migrations"
)

// TestMigrateCommand: sagacity migrate applies every migration of a new
// database of each kind and prints them and the version; run again, it
// says the schema is current. Without SAGACITY_DATABASE_URL it migrates
// the database serve would open; arguments, a misspelt variable and a
// database it cannot use are refused in one line.
func TestMigrateCommand(t *testing.T) {
	for _, db := range []struct {
		dialect string
		url     func(testing.TB) string
	}{{"postgres", testkit.PostgresURL}, {"sqlite", testkit.SQLiteURL}} {
		t.Run(db.dialect, func(t *testing.T) {
			applied, last := migrationsOf(t, db.dialect)
			url := db.url(t)
			for i, want := range []string{
				applied + fmt.Sprintf("%s: the schema is at version %d (it was at 0)\n", url, last),
				fmt.Sprintf("%s: the schema is current, at version %d; nothing to apply\n", url, last),
			} {
				var out bytes.Buffer
				if err := run(context.Background(), []string{"migrate"}, []string{"SAGACITY_DATABASE_URL=" + url}, &out); err != nil || out.String() != want {
					t.Errorf("sagacity migrate, run %d: %v\n%s\nwant\n%s", i+1, err, out.String(), want)
				}
			}
		})
	}
	t.Run("default", func(t *testing.T) {
		t.Chdir(t.TempDir())
		applied, last := migrationsOf(t, "sqlite")
		want := applied + fmt.Sprintf("sqlite:sagacity.db: the schema is at version %d (it was at 0)\n", last)
		var out bytes.Buffer
		if err := run(context.Background(), []string{"migrate"}, nil, &out); err != nil || out.String() != want {
			t.Errorf("sagacity migrate without SAGACITY_DATABASE_URL: %v\n%s\nwant\n%s", err, out.String(), want)
		}
		if _, err := os.Stat("sagacity.db"); err != nil {
			t.Errorf("sagacity migrate without SAGACITY_DATABASE_URL made no sagacity.db in the working directory: %v", err)
		}
	})
	for _, tt := range []struct {
		name    string
		args    []string
		environ []string
		code    int
		want    string
	}{
		{"arguments", []string{"migrate", "now"}, nil, 2, "migrate takes no arguments (got now)"},
		{"misspelt", []string{"migrate"}, []string{"SAGACITY_DATABASE_URI=sqlite:x.db"}, 1,
			"SAGACITY_DATABASE_URI: not a setting; did you mean SAGACITY_DATABASE_URL?"},
		{"scheme", []string{"migrate"}, []string{"SAGACITY_DATABASE_URL=mysql://root:secret@db/x"}, 1,
			`SAGACITY_DATABASE_URL: database url must start with postgres:// or sqlite: (got "mysql://root:xxxxx@db/x")`},
		{"unreachable", []string{"migrate"}, []string{"SAGACITY_DATABASE_URL=postgres://postgres@127.0.0.1:1/test"}, 1,
			"SAGACITY_DATABASE_URL: cannot reach PostgreSQL at 127.0.0.1:1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tt.args, tt.environ, &out)
			code := 1
			if ee, ok := errors.AsType[exitError](err); ok {
				code = ee.code
			}
			if err == nil || code != tt.code || !strings.HasPrefix(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") || out.Len() > 0 {
				t.Errorf("sagacity %s with %v = %v (exit %d), printed %q; want exit %d, one line starting %q",
					strings.Join(tt.args, " "), tt.environ, err, code, out.String(), tt.code, tt.want)
			}
		})
	}
}

// migrationsOf is what sagacity migrate prints of a new database's
// migrations of dialect, before its last line, and the newest's number.
func migrationsOf(t *testing.T, dialect string) (applied string, last int) {
	t.Helper()
	files, err := fs.Glob(migrations.FS, dialect+"/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations of %s: %v, %v", dialect, files, err)
	}
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintln(&b, "applied", path.Base(f))
	}
	num, _, _ := strings.Cut(path.Base(files[len(files)-1]), "_")
	if last, err = strconv.Atoi(num); err != nil {
		t.Fatal(err)
	}
	return b.String(), last
}
