package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/notify"
	"github.com/sagacity-go/sagacity/wire"
)

// Notifications: the endpoints of the notifications: section, each one
// channel. The file names the environment variables that hold their
// secrets (never SAGACITY_*: those are the server's settings); Load reads
// them.

// Notify is an endpoint as the file declares it.
type Notify struct {
	Name         string
	Events       []wire.EventType // all when empty
	Requesters   []string         // only the requests these identities made
	OnEscalation bool             // only requests an escalation step names it in
	Kind         string           // "webhook", "slack", "email" or "pagerduty"
	// The channel's settings, as the file writes them: one is set.
	webhook   *yamlWebhook
	slack     *yamlSlack
	email     *yamlEmail
	pagerDuty *yamlPagerDuty
}

type yamlNotify struct {
	Name         string         `yaml:"name"`
	Events       []string       `yaml:"events"`
	Requesters   []string       `yaml:"requesters"`
	OnEscalation bool           `yaml:"onEscalation"`
	Webhook      *yamlWebhook   `yaml:"webhook"`
	Slack        *yamlSlack     `yaml:"slack"`
	Email        *yamlEmail     `yaml:"email"`
	PagerDuty    *yamlPagerDuty `yaml:"pagerduty"`
}

type yamlWebhook struct {
	URL           string `yaml:"url"`
	SecretEnv     string `yaml:"secretEnv"`     // whsec_…: signs v1 (HMAC-SHA256)
	SigningKeyEnv string `yaml:"signingKeyEnv"` // whsk_…: signs v1a (Ed25519)
}

type yamlSlack struct {
	API      string `yaml:"api"`
	Channel  string `yaml:"channel"`
	TokenEnv string `yaml:"tokenEnv"`
}

type yamlEmail struct {
	SMTP        string   `yaml:"smtp"`
	TLS         string   `yaml:"tls"`
	From        string   `yaml:"from"`
	To          []string `yaml:"to"`
	UsernameEnv string   `yaml:"usernameEnv"`
	PasswordEnv string   `yaml:"passwordEnv"`
}

type yamlPagerDuty struct {
	URL           string `yaml:"url"`
	RoutingKeyEnv string `yaml:"routingKeyEnv"`
}

// eventTypes are the events an endpoint may ask for.
var eventTypes = wire.EventTypes

// checkNotify checks the endpoints as the file declares them.
func checkNotify(ys []yamlNotify) ([]Notify, error) {
	var out []Notify
	for i, y := range ys {
		where := fmt.Sprintf("notifications[%d]", i)
		if err := checkName(y.Name); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		where += fmt.Sprintf(" %q", y.Name)
		if slices.ContainsFunc(out, func(n Notify) bool { return n.Name == y.Name }) {
			return nil, fmt.Errorf("%s: another endpoint has that name", where)
		}
		n := Notify{Name: y.Name, Requesters: y.Requesters, OnEscalation: y.OnEscalation, webhook: y.Webhook, slack: y.Slack,
			email: y.Email, pagerDuty: y.PagerDuty}
		for _, ev := range y.Events {
			if !slices.Contains(eventTypes, wire.EventType(ev)) {
				return nil, fmt.Errorf("%s: events: %q is no event (%s)", where, ev, joinTypes())
			}
			n.Events = append(n.Events, wire.EventType(ev))
		}
		kinds := map[string]bool{"webhook": y.Webhook != nil, "slack": y.Slack != nil, "email": y.Email != nil, "pagerduty": y.PagerDuty != nil}
		for k, set := range kinds {
			if set {
				if n.Kind != "" {
					return nil, fmt.Errorf("%s: declares both %s and %s; an endpoint is one channel", where, n.Kind, k)
				}
				n.Kind = k
			}
		}
		if n.Kind == "" {
			return nil, fmt.Errorf("%s: declares no channel: one of webhook, slack, email or pagerduty", where)
		}
		if err := n.checkChannel(); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", where, n.Kind, err)
		}
		out = append(out, n)
	}
	return out, nil
}

func joinTypes() string {
	s := make([]string, len(eventTypes))
	for i, t := range eventTypes {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// checkChannel checks what the file says of the endpoint's channel.
func (n Notify) checkChannel() error {
	envs := map[string]string{}
	var required []string
	switch {
	case n.webhook != nil:
		if err := httpURL(n.webhook.URL); err != nil {
			return fmt.Errorf("url: %w", err)
		}
		if n.webhook.SecretEnv == "" && n.webhook.SigningKeyEnv == "" {
			return fmt.Errorf("name secretEnv (a whsec_ secret, for v1) or signingKeyEnv (a whsk_ key, for v1a): receivers must be able to tell its messages are Sagacity's")
		}
		envs["secretEnv"], envs["signingKeyEnv"] = n.webhook.SecretEnv, n.webhook.SigningKeyEnv
	case n.slack != nil:
		if n.slack.API != "" {
			if err := httpURL(n.slack.API); err != nil {
				return fmt.Errorf("api: %w", err)
			}
		}
		if n.slack.Channel == "" {
			return fmt.Errorf("channel is missing: the id of the channel the bot posts to (C…)")
		}
		envs["tokenEnv"], required = n.slack.TokenEnv, []string{"tokenEnv"}
	case n.email != nil:
		if len(n.email.To) == 0 {
			return fmt.Errorf("to lists nobody")
		}
		envs["usernameEnv"], envs["passwordEnv"] = n.email.UsernameEnv, n.email.PasswordEnv
	case n.pagerDuty != nil:
		if n.pagerDuty.URL != "" {
			if err := httpURL(n.pagerDuty.URL); err != nil {
				return fmt.Errorf("url: %w", err)
			}
		}
		envs["routingKeyEnv"], required = n.pagerDuty.RoutingKeyEnv, []string{"routingKeyEnv"}
	}
	for _, k := range required {
		if envs[k] == "" {
			return fmt.Errorf("%s is missing: the environment variable that holds the secret", k)
		}
	}
	for k, v := range envs {
		if strings.HasPrefix(v, "SAGACITY_") {
			return fmt.Errorf("%s: %s starts with SAGACITY_, which names the server's own settings; name the variable otherwise", k, v)
		}
	}
	return nil
}

// httpURL checks an absolute http(s) URL with a host.
func httpURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%q is not an http or https URL", s)
	}
	return nil
}

// Notifications are the endpoints, as the engine routes events to them
// and the relay sends to them, their secrets read through getenv. host
// names the server in emails' Message-IDs.
func Notifications(ns []Notify, getenv func(string) string, host string) ([]engine.Endpoint, []notify.Target, error) {
	var eps []engine.Endpoint
	var targets []notify.Target
	for i, n := range ns {
		where := fmt.Sprintf("notifications[%d] %q: %s", i, n.Name, n.Kind)
		secret := func(key, name string) (string, error) {
			if name == "" {
				return "", nil
			}
			v := getenv(name)
			if v == "" {
				return "", fmt.Errorf("%s: %s: %s is not set", where, key, name)
			}
			return v, nil
		}
		var ch notify.Channel
		var err error
		switch n.Kind {
		case "webhook":
			ch, err = webhook(n.webhook, secret)
		case "slack":
			var token string
			token, err = secret("tokenEnv", n.slack.TokenEnv)
			ch = &notify.Slack{API: n.slack.API, Token: token, Channel: n.slack.Channel}
		case "email":
			ch, err = email(n.email, secret, host)
		case "pagerduty":
			var key string
			key, err = secret("routingKeyEnv", n.pagerDuty.RoutingKeyEnv)
			ch = &notify.PagerDuty{URL: n.pagerDuty.URL, RoutingKey: key}
		}
		if err != nil {
			if strings.HasPrefix(err.Error(), where) {
				return nil, nil, err
			}
			return nil, nil, fmt.Errorf("%s: %w", where, err)
		}
		eps = append(eps, engine.Endpoint{Name: n.Name, Events: n.Events, Requesters: n.Requesters, OnEscalation: n.OnEscalation})
		targets = append(targets, notify.Target{Name: n.Name, Kind: n.Kind, Channel: ch})
	}
	return eps, targets, nil
}

func webhook(y *yamlWebhook, secret func(key, name string) (string, error)) (notify.Channel, error) {
	w := &notify.Webhook{URL: y.URL}
	s, err := secret("secretEnv", y.SecretEnv)
	if err != nil {
		return nil, err
	}
	if s != "" {
		if w.Secret, err = notify.ParseSecret(s); err != nil {
			return nil, fmt.Errorf("secretEnv: %s: %w", y.SecretEnv, err)
		}
	}
	k, err := secret("signingKeyEnv", y.SigningKeyEnv)
	if err != nil {
		return nil, err
	}
	if k != "" {
		if w.Key, err = notify.ParseSigningKey(k); err != nil {
			return nil, fmt.Errorf("signingKeyEnv: %s: %w", y.SigningKeyEnv, err)
		}
	}
	return w, nil
}

func email(y *yamlEmail, secret func(key, name string) (string, error), host string) (notify.Channel, error) {
	user, err := secret("usernameEnv", y.UsernameEnv)
	if err != nil {
		return nil, err
	}
	pass, err := secret("passwordEnv", y.PasswordEnv)
	if err != nil {
		return nil, err
	}
	e := &notify.Email{Addr: y.SMTP, TLS: y.TLS, From: y.From, To: y.To, Username: user, Password: pass, Hostname: host}
	return e, e.Check()
}
