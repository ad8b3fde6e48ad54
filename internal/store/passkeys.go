package store

import (
	"context"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// Passkeys and the WebAuthn ceremonies under way, in the engine's types.

const passkeyCols = "id, identity, issuer, subject, public_key, rp_id, origin, sign_count, enrolled_at, enrolled_seq, removed_at"

func scanPasskey(r rows) (k engine.Passkey, err error) {
	var count int64
	enrolled, removed := timeCol{col: col{name: "enrolled_at"}}, nullTime{col: col{name: "removed_at"}}
	err = r.Scan(&k.ID, &k.Identity, &k.Issuer, &k.Subject, &k.PublicKey, &k.RPID, &k.Origin, &count, &enrolled, &k.EnrolledSeq, &removed)
	k.SignCount, k.Enrolled, k.Removed = uint32(count), enrolled.v, removed.v
	return k, err
}

func (s *sqlStore) PutCeremony(ctx context.Context, c engine.Ceremony, now time.Time) error {
	return s.small(ctx, func(cn conn) error {
		if _, err := cn.exec(ctx, "DELETE FROM ceremonies WHERE expires_at < $1", now); err != nil {
			return err
		}
		_, err := cn.exec(ctx, "INSERT INTO ceremonies (id, identity, kind, data, expires_at) VALUES ($1, $2, $3, $4, $5)",
			c.ID, c.Identity, c.Kind, c.Data, c.Expires)
		return err
	})
}

func (s *sqlStore) TakeCeremony(ctx context.Context, id string) (engine.Ceremony, error) {
	var c engine.Ceremony
	err := s.small(ctx, func(cn conn) error {
		var err error
		c, err = one(ctx, cn, func(r rows) (c engine.Ceremony, err error) {
			expires := timeCol{col: col{name: "expires_at"}}
			err = r.Scan(&c.ID, &c.Identity, &c.Kind, &c.Data, &expires)
			c.Expires = expires.v
			return c, err
		}, "ceremony", "DELETE FROM ceremonies WHERE id = $1 RETURNING id, identity, kind, data, expires_at", id)
		return err
	})
	return c, err
}

func (s *sqlStore) Passkeys(ctx context.Context, identity string) ([]engine.Passkey, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return collect(ctx, s.db, scanPasskey, "SELECT "+passkeyCols+" FROM passkeys WHERE identity = $1 ORDER BY enrolled_seq LIMIT $2",
		identity, maxApprovals)
}

func (t *tx) PutPasskey(k engine.Passkey) error {
	err := t.c.queue(t.ctx, "INSERT INTO passkeys ("+passkeyCols+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
		k.ID, k.Identity, k.Issuer, k.Subject, k.PublicKey, k.RPID, k.Origin, int64(k.SignCount), k.Enrolled, k.EnrolledSeq, orNull(k.Removed))
	return mapErr(err)
}

func (t *tx) Passkey(id string) (engine.Passkey, error) {
	return one(t.ctx, t.c, scanPasskey, "passkey", "SELECT "+passkeyCols+" FROM passkeys WHERE id = $1", id)
}

func (t *tx) RemovePasskey(id string, at time.Time) error {
	return mapErr(t.c.queue(t.ctx, "UPDATE passkeys SET removed_at = $2 WHERE id = $1", id, at))
}

func (t *tx) SetSignCount(id string, n uint32) error {
	return mapErr(t.c.queue(t.ctx, "UPDATE passkeys SET sign_count = $2 WHERE id = $1", id, int64(n)))
}
