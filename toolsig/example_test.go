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

// A tool server wraps its handler so that only calls signed by Sagacity
// reach it. The handler reads the body as usual.
func ExampleHandler() {
	secret := []byte("the secret shared with Sagacity, at least 32 bytes") // in practice, from the environment

	transfer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		// Sagacity sends the same key on a retry, so a tool that
		// remembers it performs the transfer once.
		key := r.Header.Get("Idempotency-Key")
		fmt.Fprintf(w, `{"transferred":%s,"key":%q}`, body, key)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /transfer", toolsig.Handler(secret, 1<<20, transfer))

	srv := httptest.NewServer(mux)
	defer srv.Close()

	// What Sagacity sends.
	body := []byte(`{"amount":100}`)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/transfer", bytes.NewReader(body))
	req.Header.Set(toolsig.Header, toolsig.Sign(secret, time.Now(), body))
	req.Header.Set("Idempotency-Key", "saga-1/3")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(answer))

	// An unsigned request never reaches the handler.
	resp, err = http.Post(srv.URL+"/transfer", "application/json", bytes.NewReader(body))
	if err != nil {
		fmt.Println(err)
		return
	}
	answer, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Print(resp.StatusCode, " ", string(answer))
	// Output:
	// 200 {"transferred":{"amount":100},"key":"saga-1/3"}
	// 401 missing signature
}
