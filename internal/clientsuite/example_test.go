package client_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/sagacity-go/sagacity/client"
)

// An agent's irreversible call waits for a person; once approved, the
// agent resumes it with the same bytes, and the tool runs.
func Example() {
	ctx := context.Background()
	agent := &client.Client{BaseURL: os.Getenv("SAGACITY_URL"), Token: os.Getenv("SAGACITY_AGENT_TOKEN")}
	approver := &client.Client{BaseURL: os.Getenv("SAGACITY_URL"), Token: os.Getenv("SAGACITY_APPROVER_TOKEN")}

	input := `{"amount":"100","to":"alice"}`
	call, err := agent.Call(ctx, "order-42", "sendWireTransfer", input)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(call.Outcome, call.JournalSeq)

	// A person, with another token: the agent cannot approve its own call.
	d, err := approver.Approve(ctx, "order-42", call.JournalSeq, "invoice 1234 checked")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Approved, d.ApproverIdentity)

	res, err := agent.Resume(ctx, "order-42", call.JournalSeq, input)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, *res.Result)

	// A second resume runs nothing, and answers what the first came to.
	again, err := agent.Resume(ctx, "order-42", call.JournalSeq, input)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(again.Outcome, *again.Result)
	// Output:
	// AWAITING_APPROVAL 1
	// true token:approver
	// RUNNING sent order-42/1
	// EXECUTED sent order-42/1
}
