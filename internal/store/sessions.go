package store

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// The sessions and logins tables belong to auth: the store keeps them
// for it, in its types.

// PutSession stores a new session, first dropping expired ones.
func (s *sqlStore) PutSession(ctx context.Context, ss auth.Session) error {
	return s.small(ctx, func(c conn) error {
		if _, err := c.exec(ctx, "DELETE FROM sessions WHERE expires_at < $1", ss.CreatedAt); err != nil {
			return err
		}
		roles := make([]string, len(ss.Principal.Roles))
		for i, r := range ss.Principal.Roles {
			roles[i] = string(r)
		}
		var authTime int64
		if p := ss.Principal; !p.AuthTime.IsZero() {
			authTime = p.AuthTime.Unix()
		}
		var signIn string
		if in := ss.Principal.SignIn; in != nil {
			b, err := json.Marshal(in)
			if err != nil {
				return err
			}
			signIn = string(b)
		}
		_, err := c.exec(ctx, "INSERT INTO sessions (id_hash, principal, name, auth, roles, member_of, issuer, subject, auth_time, sign_in,"+
			" created_at, seen_at, expires_at, seal) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
			ss.IDHash, ss.Principal.ID, ss.Principal.Name, ss.Principal.Auth, strings.Join(roles, ","), strings.Join(ss.Principal.Groups, "\n"),
			ss.Principal.Issuer, ss.Principal.Subject, authTime, signIn, ss.CreatedAt, ss.SeenAt, ss.ExpiresAt, ss.Seal)
		return err
	})
}

// Session returns a session; NotFound when absent.
func (s *sqlStore) Session(ctx context.Context, idHash string) (auth.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return one(ctx, s.db, func(r rows) (ss auth.Session, err error) {
		var roles, groups, signIn string
		var authTime int64
		err = r.Scan(&ss.IDHash, &ss.Principal.ID, &ss.Principal.Name, &ss.Principal.Auth, &roles, &groups, &ss.Principal.Issuer,
			&ss.Principal.Subject, &authTime, &signIn, &ss.CreatedAt, &ss.SeenAt, &ss.ExpiresAt, &ss.Seal)
		if err != nil {
			return ss, err
		}
		if signIn != "" {
			// A sign-in that does not read leaves the session without
			// one, which its seal then does not cover.
			var in engine.SignIn
			if json.Unmarshal([]byte(signIn), &in) == nil {
				ss.Principal.SignIn = &in
			}
		}
		if groups != "" {
			ss.Principal.Groups = strings.Split(groups, "\n")
		}
		if authTime != 0 {
			ss.Principal.AuthTime = time.Unix(authTime, 0).UTC()
		}
		for _, role := range strings.Split(roles, ",") {
			if role != "" {
				ss.Principal.Roles = append(ss.Principal.Roles, engine.Role(role))
			}
		}
		ss.CreatedAt, ss.SeenAt, ss.ExpiresAt = ss.CreatedAt.UTC(), ss.SeenAt.UTC(), ss.ExpiresAt.UTC()
		return ss, err
	}, "session", "SELECT id_hash, principal, name, auth, roles, member_of, issuer, subject, auth_time, sign_in, created_at, seen_at,"+
		" expires_at, seal FROM sessions WHERE id_hash = $1", idHash)
}

// TouchSession records activity on a session, with its new seal.
func (s *sqlStore) TouchSession(ctx context.Context, idHash string, at time.Time, seal string) error {
	return s.small(ctx, func(c conn) error {
		_, err := c.exec(ctx, "UPDATE sessions SET seen_at = $2, seal = $3 WHERE id_hash = $1", idHash, at, seal)
		return err
	})
}

// DeleteSession ends a session; ending one that is gone is fine.
func (s *sqlStore) DeleteSession(ctx context.Context, idHash string) error {
	return s.small(ctx, func(c conn) error {
		_, err := c.exec(ctx, "DELETE FROM sessions WHERE id_hash = $1", idHash)
		return err
	})
}

// PutLogin stores a sign-in in progress, first dropping stale ones.
func (s *sqlStore) PutLogin(ctx context.Context, l auth.Login, staleBefore time.Time) error {
	return s.small(ctx, func(c conn) error {
		if _, err := c.exec(ctx, "DELETE FROM logins WHERE created_at < $1", staleBefore); err != nil {
			return err
		}
		var reauth int64
		if l.Reauth {
			reauth = 1
		}
		_, err := c.exec(ctx, "INSERT INTO logins (id_hash, state, nonce, verifier, return_to, max_age, reauth, created_at, seal)"+
			" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
			l.IDHash, l.State, l.Nonce, l.Verifier, l.ReturnTo, int64(l.MaxAge/time.Second), reauth, l.CreatedAt, l.Seal)
		return err
	})
}

// TakeLogin returns a sign-in in progress and deletes it, so it can be
// completed once; NotFound when absent.
func (s *sqlStore) TakeLogin(ctx context.Context, idHash string) (auth.Login, error) {
	var l auth.Login
	err := s.small(ctx, func(c conn) error {
		var err error
		l, err = one(ctx, c, func(r rows) (l auth.Login, err error) {
			var maxAge, reauth int64
			err = r.Scan(&l.IDHash, &l.State, &l.Nonce, &l.Verifier, &l.ReturnTo, &maxAge, &reauth, &l.CreatedAt, &l.Seal)
			l.CreatedAt, l.MaxAge, l.Reauth = l.CreatedAt.UTC(), time.Duration(maxAge)*time.Second, reauth != 0
			return l, err
		}, "sign-in", "DELETE FROM logins WHERE id_hash = $1 RETURNING id_hash, state, nonce, verifier, return_to, max_age, reauth, created_at, seal", idHash)
		return err
	})
	return l, err
}
