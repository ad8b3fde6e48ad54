package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/notify"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// notifications declares one endpoint of each channel.
const notifications = `
notifications:
  - name: finance-slack
    events: [request.waiting, request.approved, request.executed]
    slack: {channel: C0123, tokenEnv: SLACK_BOT_TOKEN}
  - name: oncall-mail
    onEscalation: true
    email: {smtp: "smtp.example.com:587", from: sagacity@example.com, to: [oncall@example.com], usernameEnv: SMTP_USER, passwordEnv: SMTP_PASSWORD}
  - name: pager
    onEscalation: true
    pagerduty: {routingKeyEnv: PD_ROUTING_KEY}
  - name: agent-7
    requesters: ["token:agent-7"]
    webhook: {url: "https://agent.example.com/hook", secretEnv: AGENT_HOOK_SECRET}
`

// secrets are the environment the file's endpoints read.
var secrets = map[string]string{"SLACK_BOT_TOKEN": "xoxb-secret-token", "SMTP_USER": "smtp-user-name", "SMTP_PASSWORD": "smtp-secret",
	"PD_ROUTING_KEY": "0123456789abcdef0123456789abcdef", "AGENT_HOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
	"SAGACITY_PUBLIC_URL": "https://sagacity.example.com"}

// TestNotifications: each endpoint of the file becomes the engine's
// route and the relay's channel, its secret read from the variable the
// file names; every mistake is one line naming the endpoint, and none
// repeats a secret.
func TestNotifications(t *testing.T) {
	vars := map[string]string{"SAGACITY_CONFIG": writeConfig(t, notifications)}
	for k, v := range secrets {
		vars[k] = v
	}
	c, err := Load(env(vars))
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.Endpoint{
		{Name: "finance-slack", Events: []wire.EventType{wire.EventWaiting, wire.EventApproved, wire.EventExecuted}},
		{Name: "oncall-mail", OnEscalation: true}, {Name: "pager", OnEscalation: true},
		{Name: "agent-7", Requesters: []string{"token:agent-7"}},
	}
	if diff := cmp.Diff(want, c.Endpoints); diff != "" {
		t.Errorf("endpoints differ (-want +got):\n%s", diff)
	}
	var kinds []string
	for _, tg := range c.Targets {
		kinds = append(kinds, tg.Name+"="+tg.Kind)
	}
	if got := strings.Join(kinds, " "); got != "finance-slack=slack oncall-mail=email pager=pagerduty agent-7=webhook" {
		t.Errorf("targets = %s", got)
	}
	if s := c.Targets[0].Channel.(*notify.Slack); s.Token != "xoxb-secret-token" || s.Channel != "C0123" {
		t.Errorf("the Slack channel = %+v", s)
	}
	if m := c.Targets[1].Channel.(*notify.Email); m.Password != "smtp-secret" || m.Hostname != "sagacity.example.com" || m.TLS != "" {
		t.Errorf("the email channel = %+v; want its password and the public URL's host", m)
	}
	if w := c.Targets[3].Channel.(*notify.Webhook); len(w.Secret) == 0 || w.Key != nil {
		t.Errorf("the webhook = %+v; want its v1 secret", w)
	}

	for _, tt := range []struct{ name, yaml, unset, want string }{
		{"two channels", "notifications:\n  - {name: a, slack: {channel: C1, tokenEnv: T}, pagerduty: {routingKeyEnv: K}}\n", "",
			`notifications[0] "a": declares both`},
		{"no channel", "notifications:\n  - {name: a}\n", "", `notifications[0] "a": declares no channel`},
		{"an unknown event", "notifications:\n  - {name: a, events: [request.approve], pagerduty: {routingKeyEnv: K}}\n", "",
			`notifications[0] "a": events: "request.approve" is no event`},
		{"a name twice", notifications + "  - {name: pager, pagerduty: {routingKeyEnv: K}}\n", "", `notifications[4] "pager": another endpoint has that name`},
		{"a webhook unsigned", "notifications:\n  - {name: a, webhook: {url: \"https://x.example\"}}\n", "",
			`notifications[0] "a": webhook: name secretEnv`},
		{"a webhook to no URL", "notifications:\n  - {name: a, webhook: {url: \"ftp://x\", secretEnv: S}}\n", "",
			`notifications[0] "a": webhook: url: "ftp://x" is not an http or https URL`},
		{"a secret in a server setting", "notifications:\n  - {name: a, slack: {channel: C1, tokenEnv: SAGACITY_SLACK}}\n", "",
			`notifications[0] "a": slack: tokenEnv: SAGACITY_SLACK starts with SAGACITY_`},
		{"a secret not set", notifications, "SLACK_BOT_TOKEN", `notifications[0] "finance-slack": slack: tokenEnv: SLACK_BOT_TOKEN is not set`},
		{"a webhook secret that is none", notifications, "", `notifications[3] "agent-7": webhook: secretEnv: AGENT_HOOK_SECRET:`},
	} {
		vars := map[string]string{"SAGACITY_CONFIG": writeConfig(t, tt.yaml)}
		for k, v := range secrets {
			if k != tt.unset {
				vars[k] = v
			}
		}
		if tt.name == "a webhook secret that is none" {
			vars["AGENT_HOOK_SECRET"] = "not-a-whsec-secret"
		}
		_, err := Load(env(vars))
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: Load = %v; want one line with %q", tt.name, err, tt.want)
			continue
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) && !strings.HasPrefix(s, "https://") {
				t.Errorf("%s: the error repeats a secret: %v", tt.name, err)
			}
		}
	}
}

// TestReadmeNotifications: the README's notifications example, read out
// of README.md and loaded as printed, declares its five endpoints and
// the large transfers' escalation, which the engine then takes
// (internal/app TestEscalation runs it).
func TestReadmeNotifications(t *testing.T) {
	yaml, secrets := testkit.ReadmeNotifications(t)
	vars := map[string]string{"SAGACITY_CONFIG": writeConfig(t, yaml), "SAGACITY_PUBLIC_URL": "https://sagacity.example.com"}
	for k, v := range secrets {
		vars[k] = v
	}
	c, err := Load(env(vars))
	if err != nil {
		t.Fatalf("Load(the README's notifications example) = %v", err)
	}
	var names []string
	for _, ep := range c.Endpoints {
		names = append(names, ep.Name)
	}
	if got := strings.Join(names, " "); got != "finance-slack finance-mail finance-oncall audit-hook agent-7" {
		t.Errorf("the example's endpoints = %s", got)
	}
	r, ok := c.File.Approvals.Rule("sendWireTransfer", "large")
	if !ok {
		t.Fatalf("the example's policy has no rule large for sendWireTransfer")
	}
	want := []engine.Step{{After: 30 * time.Minute, Notify: []string{"finance-slack"}}, {After: 2 * time.Hour, Notify: []string{"finance-oncall"}}}
	if diff := cmp.Diff(want, r.Escalate); diff != "" {
		t.Errorf("rule large's escalation differs (-want +got):\n%s", diff)
	}
	for _, tt := range []struct{ step, want string }{
		{"{after: soon, notify: [finance-slack]}", `escalate step 1: after: "soon" is not a duration`},
		{"{after: 5h, notify: [finance-slack]}", "escalate step 1: after (5h0m0s) must come before the request expires (4h0m0s)"},
	} {
		bad := strings.Replace(yaml, "{after: 30m, notify: [finance-slack]}", tt.step, 1)
		vars["SAGACITY_CONFIG"] = writeConfig(t, bad)
		if _, err := Load(env(vars)); err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Load(a step %s) = %v; want one line with %q", tt.step, err, tt.want)
		}
	}
}
