package store

import (
	"strings"
	"time"
)

// Columns that a row rewritten by hand may hold garbage in (SQLite keeps
// any value in any column; PostgreSQL keeps 'infinity' in a timestamp).
// They read what they can and note what they cannot, so that a tampered
// row is reported by verification where it is, instead of failing the read.

// col is a column's name, and whether its value could not be read.
type col struct {
	name string
	bad  bool
}

// unreadable describes the columns that could not be read, or is "".
func unreadable(cols ...*col) string {
	var bad []string
	for _, c := range cols {
		if c.bad {
			bad = append(bad, c.name)
		}
	}
	if bad == nil {
		return ""
	}
	return "column " + strings.Join(bad, ", ") + " does not hold a value of its type"
}

// timeCol reads a timestamp: time.Time, or unix microseconds.
type timeCol struct {
	col
	v time.Time
}

func (c *timeCol) Scan(src any) error {
	switch v := src.(type) {
	case time.Time:
		c.v = v.UTC()
	case int64:
		c.v = time.UnixMicro(v).UTC()
	default:
		c.bad = true
	}
	return nil
}

// intCol reads an integer; a NULL reads as null when the column may hold
// one (null is not 0), else it is not a value.
type intCol struct {
	col
	v    int64
	null int64
}

func (c *intCol) Scan(src any) error {
	if src == nil && c.null != 0 {
		c.v = c.null
		return nil
	}
	v, ok := src.(int64)
	c.v, c.bad = v, !ok
	return nil
}

// boolCol reads a boolean, or SQLite's 0 and 1.
type boolCol struct {
	col
	v bool
}

func (c *boolCol) Scan(src any) error {
	switch v := src.(type) {
	case bool:
		c.v = v
	case int64:
		c.v, c.bad = v == 1, v != 0 && v != 1
	default:
		c.bad = true
	}
	return nil
}

// presentCol reads whether a column (of an outer join) holds anything.
type presentCol struct{ ok bool }

func (c *presentCol) Scan(src any) error {
	c.ok = src != nil
	return nil
}

// nullTime reads a timestamp that may be NULL (zero).
type nullTime struct {
	col
	v time.Time
}

func (c *nullTime) Scan(src any) error {
	if src == nil {
		c.v = time.Time{}
		return nil
	}
	t := timeCol{col: c.col}
	err := t.Scan(src)
	c.v, c.bad = t.v, t.bad
	return err
}
