package console

import (
	"net/http"
	"strconv"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/web/templates"
)

// Notifications shows how notifications stand: each endpoint's backlog
// and the deliveries failing or given up on, with what an operator may
// do: GET /notifications.
func (h *Handlers) Notifications(w http.ResponseWriter, r *http.Request) error {
	p := auth.From(r.Context())
	stats, failing, err := h.Engine.Outbox(r.Context(), p)
	if err != nil {
		return err
	}
	v := templates.NotificationsPage{Chrome: h.chrome(r, "Notifications", "/notifications")}
	if err := h.Engine.Can(p, engine.ActResend, engine.Subject{}); err != nil {
		v.NoResend = "You cannot retry a delivery or enable an endpoint: " + message(err) + "."
	}
	for _, ep := range h.Engine.Endpoints() {
		v.Endpoints = append(v.Endpoints, templates.EndpointRow{Name: ep.Name, Events: eventNames(ep), Escalation: ep.OnEscalation})
	}
	for _, s := range stats {
		i := endpointRow(&v, s.Name)
		row := &v.Endpoints[i]
		row.Pending, row.Failing, row.Failed, row.LastError = s.Pending, s.Failing, s.Failed, s.LastError
		if !s.Oldest.IsZero() {
			row.Oldest = ago(h.Now().Sub(s.Oldest))
		}
		if !s.Disabled.IsZero() {
			t := h.when(s.Disabled)
			row.Disabled, row.DisabledWhy = &t, s.DisabledWhy
		}
	}
	for _, d := range failing {
		v.Failing = append(v.Failing, h.delivery(d))
	}
	return render(w, r, http.StatusOK, templates.Notifications(v))
}

// endpointRow is the index of the endpoint row named name, added when
// the server no longer has it.
func endpointRow(v *templates.NotificationsPage, name string) int {
	for i, e := range v.Endpoints {
		if e.Name == name {
			return i
		}
	}
	v.Endpoints = append(v.Endpoints, templates.EndpointRow{Name: name, Gone: true})
	return len(v.Endpoints) - 1
}

// eventNames says which events an endpoint hears of.
func eventNames(ep engine.Endpoint) string {
	if len(ep.Events) == 0 {
		return "all"
	}
	s := ""
	for i, e := range ep.Events {
		if i > 0 {
			s += ", "
		}
		s += string(e)
	}
	return s
}

// delivery shows a delivery.
func (h *Handlers) delivery(d engine.Delivery) templates.DeliveryRow {
	row := templates.DeliveryRow{ID: d.ID, Endpoint: d.Endpoint, Event: string(d.Event.Type), EventID: d.Event.ID, State: string(d.State),
		Attempts: d.Attempts, Status: d.LastStatus, Error: d.LastError, Created: h.when(d.Created)}
	if d.Event.SagaID != "" && d.Event.JournalSeq > 0 {
		row.Saga, row.Seq, row.Href = d.Event.SagaID, d.Event.JournalSeq, templates.RequestHref(d.Event.SagaID, d.Event.JournalSeq)
	}
	if !d.LastAt.IsZero() {
		t := h.when(d.LastAt)
		row.Last = &t
	}
	if d.State == engine.DeliveryPending && !d.LastAt.IsZero() {
		row.Next = h.until(d.Next)
	}
	row.Retry = d.State == engine.DeliveryPending || d.State == engine.DeliveryFailed
	return row
}

// RetryDelivery makes a failing delivery due now, journaled under the
// person: POST /notifications/retry with id.
func (h *Handlers) RetryDelivery(w http.ResponseWriter, r *http.Request) error {
	if err := parseForm(r); err != nil {
		return err
	}
	id, err := strconv.ParseInt(r.PostForm.Get("id"), 10, 64)
	if err != nil || id <= 0 {
		return engine.Errorf(engine.Invalid, "id must be a delivery's number")
	}
	if err := h.Engine.RetryDelivery(r.Context(), auth.From(r.Context()), id); err != nil {
		return err
	}
	http.Redirect(w, r, "/notifications", http.StatusSeeOther)
	return nil
}

// EnableEndpoint lets deliveries to a disabled endpoint go again,
// journaled under the person: POST /notifications/enable with name.
func (h *Handlers) EnableEndpoint(w http.ResponseWriter, r *http.Request) error {
	if err := parseForm(r); err != nil {
		return err
	}
	if err := h.Engine.EnableEndpoint(r.Context(), auth.From(r.Context()), r.PostForm.Get("name")); err != nil {
		return err
	}
	http.Redirect(w, r, "/notifications", http.StatusSeeOther)
	return nil
}

// notificationsOf shows the deliveries of a request's events, for its
// page; none when the server has no notifications.
func (h *Handlers) notificationsOf(r *http.Request, saga string, seq int64) ([]templates.DeliveryRow, error) {
	if len(h.Engine.Endpoints()) == 0 {
		return nil, nil
	}
	ds, err := h.Engine.Notifications(r.Context(), auth.From(r.Context()), saga, seq)
	if engine.IsKind(err, engine.Forbidden) {
		return nil, nil
	}
	var rows []templates.DeliveryRow
	for _, d := range ds {
		rows = append(rows, h.delivery(d))
	}
	return rows, err
}
