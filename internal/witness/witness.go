// Package witness keeps the log's signed checkpoints in an append-only
// directory outside the database: one file a checkpoint, named by the
// log's size, never replaced; and which process started with it last. An operator ships the directory to another
// machine (rsync, object storage with retention, a transparency witness);
// the server checks its database against the newest file in it.
package witness

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// maxNote bounds a checkpoint file read back.
const maxNote = 64 << 10

// name matches the names engine.CheckpointFile gives.
var name = regexp.MustCompile(`^[0-9]{20}\.checkpoint$`)

// Dir is a checkpoint directory.
type Dir struct{ path string }

// Open opens the directory at path, creating it (mode 0700) if needed.
func Open(path string) (*Dir, error) {
	if path == "" {
		return nil, errors.New("checkpoint directory: no path")
	}
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint directory: %w", err)
	}
	return &Dir{path: path}, nil
}

// Path is the directory's path.
func (d *Dir) Path() string { return d.path }

// Publish keeps the checkpoint signed at size, durably (the file and the
// directory are synced), under a name no other write takes: a second
// publish of the same checkpoint is a no-op, of a different one at the
// same size an error (two logs forked at that size).
func (d *Dir) Publish(size int64, signed string) error {
	final := filepath.Join(d.path, engine.CheckpointFile(size))
	// A hard link never replaces a file that is there: the append-only
	// step.
	err := d.write(signed, func(tmp string) error { return os.Link(tmp, final) })
	if !errors.Is(err, fs.ErrExist) {
		return err
	}
	had, rerr := read(final)
	if rerr != nil {
		return rerr
	}
	if had != signed {
		return fmt.Errorf("%s holds a different checkpoint of size %d: the log forked", final, size)
	}
	return nil
}

// write writes text to a new file in the directory, synced, has place put
// it where it goes, and syncs the directory.
func (d *Dir) write(text string, place func(tmp string) error) error {
	tmp, err := os.CreateTemp(d.path, ".publish-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(text); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := place(tmp.Name()); err != nil {
		return err
	}
	dir, err := os.Open(d.path)
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}

// runnerFile holds the runner of the newest process started with the
// directory: the one the next process retires.
const runnerFile = "runner"

// Runner returns the runner of the newest process started with the
// directory (engine.Lineage), "" when none was.
func (d *Dir) Runner() (string, error) {
	b, err := os.ReadFile(filepath.Join(d.path, runnerFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("checkpoint directory: %w", err)
	}
	id, ok := strings.CutSuffix(string(b), "\n")
	if !ok || len(id) > maxRunner || strings.ContainsAny(id, "\n") {
		return "", fmt.Errorf("checkpoint directory: %s does not hold a runner id", runnerFile)
	}
	return id, nil
}

// maxRunner bounds a runner id read back.
const maxRunner = 64

// SetRunner records id as the runner of the newest process started with
// the directory, durably, in place of the one before.
func (d *Dir) SetRunner(id string) error {
	final := filepath.Join(d.path, runnerFile)
	if err := d.write(id+"\n", func(tmp string) error { return os.Rename(tmp, final) }); err != nil {
		return fmt.Errorf("checkpoint directory: %w", err)
	}
	return nil
}

// Newest returns the checkpoint of the largest size kept, and when its
// file was written; "" when none.
func (d *Dir) Newest() (string, time.Time, error) {
	des, err := os.ReadDir(d.path)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("checkpoint directory: %w", err)
	}
	var names []string
	for _, de := range des {
		if name.MatchString(de.Name()) {
			names = append(names, de.Name())
		}
	}
	if len(names) == 0 {
		return "", time.Time{}, nil
	}
	path := filepath.Join(d.path, slices.Max(names))
	fi, err := os.Stat(path)
	if err != nil {
		return "", time.Time{}, err
	}
	signed, err := read(path)
	return signed, fi.ModTime().UTC(), err
}

// Get returns the checkpoint kept of a size, "" when none.
func (d *Dir) Get(size int64) (string, error) {
	signed, err := read(filepath.Join(d.path, engine.CheckpointFile(size)))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return signed, err
}

func read(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxNote+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxNote {
		return "", fmt.Errorf("%s is larger than a checkpoint (%d bytes)", path, maxNote)
	}
	if !bytes.HasSuffix(b, []byte("\n")) {
		return "", fmt.Errorf("%s is not a signed checkpoint (cut short?)", path)
	}
	return string(b), nil
}
