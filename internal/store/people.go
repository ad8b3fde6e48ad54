package store

import (
	"context"
	"strings"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// The people the server knows (team health): each identity's roles and
// groups as its newest sign-in gave them.

const peopleCols = "identity, name, auth, roles, member_of, seen_at"

// RecordPerson keeps p as what the server knows of its identity, unless
// it knows of a later sign-in already.
func (s *sqlStore) RecordPerson(ctx context.Context, p engine.Person) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	roles := make([]string, len(p.Roles))
	for i, r := range p.Roles {
		roles[i] = string(r)
	}
	_, err := s.db.exec(ctx, "INSERT INTO members ("+peopleCols+") VALUES ($1, $2, $3, $4, $5, $6)"+
		" ON CONFLICT (identity) DO UPDATE SET name = excluded.name, auth = excluded.auth, roles = excluded.roles,"+
		" member_of = excluded.member_of, seen_at = excluded.seen_at WHERE members.seen_at <= excluded.seen_at",
		p.ID, p.Name, string(p.Auth), strings.Join(roles, ","), strings.Join(p.Groups, "\n"), p.SeenAt)
	return mapErr(err)
}

// People returns the people the server knows, the most recently seen
// first, at most limit.
func (s *sqlStore) People(ctx context.Context, limit int) ([]engine.Person, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return collect(ctx, s.db, func(r rows) (p engine.Person, err error) {
		var auth, roles, groups string
		seen := timeCol{col: col{name: "seen_at"}}
		if err = r.Scan(&p.ID, &p.Name, &auth, &roles, &groups, &seen); err != nil {
			return p, err
		}
		if bad := unreadable(&seen.col); bad != "" {
			return p, engine.Errorf(engine.Internal, "the known person %s: %s", p.ID, bad)
		}
		p.Auth, p.SeenAt = engine.AuthMethod(auth), seen.v
		for _, role := range strings.Split(roles, ",") {
			if role != "" {
				p.Roles = append(p.Roles, engine.Role(role))
			}
		}
		if groups != "" {
			p.Groups = strings.Split(groups, "\n")
		}
		return p, nil
	}, "SELECT "+peopleCols+" FROM members ORDER BY seen_at DESC, identity LIMIT $1", limit)
}
