package engine

import (
	"errors"
	"slices"
	"testing"
)

func TestCan(t *testing.T) {
	agent := Principal{ID: "agent-1", Roles: []Role{RoleAgent}}
	other := Principal{ID: "agent-2", Roles: []Role{RoleAgent}}
	approver := Principal{ID: "alice", Roles: []Role{RoleApprover}}
	auditor := Principal{ID: "audrey", Roles: []Role{RoleAuditor}}
	// A principal holding two roles: it may ask for both kinds of action,
	// but never decide what it started or requested.
	both := Principal{ID: "bot", Roles: []Role{RoleAgent, RoleApprover}}
	mine := &Saga{ID: "s1", Initiator: "agent-1"}
	bots := &Saga{ID: "s2", Initiator: "bot"}

	tests := []struct {
		name   string
		shared bool
		p      Principal
		a      Action
		sub    Subject
		want   string // "" allowed, else the error
	}{
		{"no principal", false, Principal{}, ActRead, Subject{}, "no authenticated principal"},
		{"agent calls", false, agent, ActCall, Subject{}, ""},
		{"approver cannot call", false, approver, ActCall, Subject{}, "calling a tool needs the agent role"},
		{"auditor cannot approve", false, auditor, ActApprove, Subject{}, "approving needs the approver role"},
		{"agent cannot verify", false, agent, ActVerify, Subject{}, "verifying a journal needs the auditor or approver role"},
		{"auditor verifies", false, auditor, ActVerify, Subject{}, ""},
		{"anyone with a role reads", false, agent, ActRead, Subject{}, ""},
		{"an agent reads its saga", false, agent, ActRead, Subject{Saga: mine}, ""},
		{"an agent cannot read another's", false, agent, ActRead, Subject{Saga: bots}, "saga s2 is not yours to read: an agent reads only the sagas it started"},
		{"shared: an agent reads another's", true, agent, ActRead, Subject{Saga: bots}, ""},
		{"an auditor reads any", false, auditor, ActRead, Subject{Saga: bots}, ""},
		{"an approver reads any", false, approver, ActRead, Subject{Saga: mine}, ""},
		{"unknown action", false, agent, Action("launch"), Subject{}, `unknown action "launch"`},
		{"auditor reads metrics", false, auditor, ActMetrics, Subject{}, ""},
		{"approver reads metrics", false, approver, ActMetrics, Subject{}, ""},
		{"agent cannot read metrics", false, agent, ActMetrics, Subject{}, "reading metrics needs the auditor or approver role"},
		{"auditor reads notifications", false, auditor, ActOutbox, Subject{}, ""},
		{"approver sends notifications again", false, approver, ActResend, Subject{}, ""},
		{"auditor cannot send notifications again", false, auditor, ActResend, Subject{}, "sending notifications again needs the approver role"},
		{"agent cannot send notifications again", false, agent, ActResend, Subject{}, "sending notifications again needs the approver role"},

		{"initiator calls in its saga", false, agent, ActCall, Subject{Saga: mine}, ""},
		{"another agent cannot call in it", false, other, ActCall, Subject{Saga: mine}, "saga s1 belongs to agent-1; only its initiator may act on it as an agent"},
		{"another agent cannot end it", false, other, ActEnd, Subject{Saga: mine}, "saga s1 belongs to agent-1; only its initiator may act on it as an agent"},
		{"another agent cannot abort it", false, other, ActAbort, Subject{Saga: mine}, "saga s1 belongs to agent-1; only its initiator may act on it as an agent"},
		{"another agent cannot resume in it", false, other, ActResume, Subject{Saga: mine}, "saga s1 belongs to agent-1; only its initiator may act on it as an agent"},
		{"shared: another agent calls", true, other, ActCall, Subject{Saga: mine}, ""},
		{"shared: another agent ends", true, other, ActEnd, Subject{Saga: mine}, ""},
		{"an approver aborts any saga", false, approver, ActAbort, Subject{Saga: mine}, ""},
		{"an approver resumes any saga", false, approver, ActResume, Subject{Saga: mine}, ""},
		{"an agent+approver cannot call in another's saga", false, both, ActCall, Subject{Saga: mine}, "saga s1 belongs to agent-1; only its initiator may act on it as an agent"},

		{"approver approves", false, approver, ActApprove, Subject{Saga: mine, Requester: "agent-1"}, ""},
		{"initiator cannot approve", false, both, ActApprove, Subject{Saga: bots, Requester: "agent-1"}, "bot started saga s2 and cannot decide its requests"},
		{"initiator cannot reject", false, both, ActReject, Subject{Saga: bots}, "bot started saga s2 and cannot decide its requests"},
		{"requester cannot approve", false, both, ActApprove, Subject{Saga: mine, Requester: "bot"}, "bot made this request and cannot decide it"},
		{"requester cannot reject", true, both, ActReject, Subject{Saga: mine, Requester: "bot"}, "bot made this request and cannot decide it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &Engine{access: Access{ShareSagas: tt.shared}}
			err := e.Can(tt.p, tt.a, tt.sub)
			got := ""
			if err != nil {
				if e, ok := errors.AsType[*Error](err); ok {
					got = e.Msg
				} else {
					got = err.Error()
				}
			}
			if got != tt.want {
				t.Errorf("Can(%s, %s, %+v) = %q, want %q", tt.p.ID, tt.a, tt.sub, got, tt.want)
			}
			if err != nil && tt.p.ID != "" && KindOf(err) != Forbidden {
				t.Errorf("Can(%s, %s) kind = %v, want forbidden", tt.p.ID, tt.a, KindOf(err))
			}
		})
	}
}

// TestExecutors: who executors says may execute an approved request is
// who Can lets resume it.
func TestExecutors(t *testing.T) {
	s := Saga{ID: "s1", Initiator: "agent-1"}
	people := []Principal{
		{ID: "agent-1", Roles: []Role{RoleAgent}},
		{ID: "agent-2", Roles: []Role{RoleAgent}},
		{ID: "alice", Roles: []Role{RoleApprover}},
		{ID: "audrey", Roles: []Role{RoleAuditor}},
	}
	for _, shared := range []bool{false, true} {
		e := &Engine{access: Access{ShareSagas: shared}}
		x := e.executors(s)
		for _, p := range people {
			got := p.ID == x.Initiator || (x.Approvers && p.Has(RoleApprover)) || (x.Agents && p.Has(RoleAgent))
			if want := e.Can(p, ActResume, Subject{Saga: &s}) == nil; got != want {
				t.Errorf("shared=%t: executors(%s) = %+v lets %s execute: %t; Can says %t", shared, s.ID, x, p.ID, got, want)
			}
		}
	}
}

func TestParseRoles(t *testing.T) {
	for _, tt := range []struct {
		names []string
		want  []Role
		err   string
	}{
		{names: []string{"approver"}, want: []Role{RoleApprover}},
		{names: []string{"auditor", "agent", "auditor"}, want: []Role{RoleAuditor, RoleAgent}},
		{names: nil, err: "roles is missing; give at least one of agent, approver, auditor"},
		{names: []string{"approver", "root"}, err: `role "root" is not one of agent, approver, auditor`},
		{names: []string{"Approver"}, err: `role "Approver" is not one of agent, approver, auditor`},
	} {
		got, err := ParseRoles(tt.names)
		if tt.err != "" {
			if !IsKind(err, Invalid) || err.Error() != tt.err {
				t.Errorf("ParseRoles(%q) = %v, %v; want Invalid %q", tt.names, got, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ParseRoles(%q) = %v, %v; want %v", tt.names, got, err, tt.want)
		}
	}
}
