package toolsig_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sagacity-go/sagacity/toolsig"
)

// Each tool server wraps its endpoint with the tool and phase it serves, so
// that only calls Sagacity signed for that tool reach it. Here two tools,
// each on its own server, use the same path: a request signed for the
// harmless one is refused by the other.
func ExampleHandler() {
	secret := []byte("the secret shared with Sagacity, at least 32 bytes") // in practice, from the environment

	transfer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		// Sagacity sends the same key on a retry, so a tool that
		// remembers it performs the transfer once.
		fmt.Fprintf(w, `{"transferred":%s,"key":%q}`, body, r.Header.Get(toolsig.HeaderKey))
	})
	wire := httptest.NewServer(toolsig.Handler(secret, toolsig.Expect{Tool: "sendWireTransfer", Phase: toolsig.Execute}, 1<<20, transfer))
	defer wire.Close()

	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(w, r.Body) })
	notes := httptest.NewServer(toolsig.Handler(secret, toolsig.Expect{Tool: "saveNote", Phase: toolsig.Execute}, 1<<20, echo))
	defer notes.Close()

	// sagacity builds a request as Sagacity sends it: the execute call of
	// tool at saga-1/3.
	sagacity := func(url, tool string, body []byte) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set(toolsig.HeaderSaga, "saga-1")
		req.Header.Set(toolsig.HeaderSeq, "3")
		req.Header.Set(toolsig.HeaderTool, toolsig.HeaderValue(tool))
		req.Header.Set(toolsig.HeaderPhase, string(toolsig.Execute))
		req.Header.Set(toolsig.HeaderKey, "saga-1/3")
		req.Header.Set(toolsig.Header, toolsig.Sign(secret, time.Now(), toolsig.RequestOf(req), body))
		return req
	}
	show := func(req *http.Request) {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(bytes.TrimSpace(answer)))
	}

	body := []byte(`{"amount":100}`)
	show(sagacity(wire.URL+"/execute", "sendWireTransfer", body))

	// A call to the harmless tool, which needs no approval.
	note := sagacity(notes.URL+"/execute", "saveNote", body)
	show(note)

	// The same signed bytes, replayed to the transfer tool.
	replay, _ := http.NewRequest(http.MethodPost, wire.URL+"/execute", bytes.NewReader(body))
	replay.Header = note.Header.Clone()
	show(replay)

	// An unsigned request never reaches the handler either.
	unsigned, _ := http.NewRequest(http.MethodPost, wire.URL+"/execute", bytes.NewReader(body))
	show(unsigned)
	// Output:
	// 200 {"transferred":{"amount":100},"key":"saga-1/3"}
	// 200 {"amount":100}
	// 401 signature not for this endpoint: Sagacity-Tool is not this endpoint's tool
	// 401 missing signature
}
