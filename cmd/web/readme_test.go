package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/internal/api/apitest"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// walkthrough returns the shell commands of the README's walkthrough block,
// with continuation lines joined.
func walkthrough(t *testing.T) []string {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(b), "<!-- walkthrough")
	block, _, ok2 := strings.Cut(block, "<!-- /walkthrough -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no walkthrough block")
	}
	var cmds []string
	cur := ""
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(line)
		if cur == "" && !strings.HasPrefix(line, "curl ") {
			continue
		}
		if more, ok := strings.CutSuffix(line, `\`); ok {
			cur += more
			continue
		}
		cmds = append(cmds, cur+line)
		cur = ""
	}
	return cmds
}

// TestReadmeWalkthrough runs the README's curl commands, as written,
// against the demo server, so the walkthrough cannot rot.
func TestReadmeWalkthrough(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed to run the README's walkthrough:", err)
	}
	base, _ := start(t, map[string]string{"SAGACITY_DATABASE_URL": testkit.SQLiteURL(t), "SAGACITY_DEMO": "true"})
	// Through a proxy that holds every request and answer to the OpenAPI
	// document: dev mode's anonymous calls included.
	proxy, err := apitest.NewProxy(base)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	host := strings.TrimPrefix(proxy.URL, "http://")
	wants := []string{
		`"sagaId":"transfer-77","journalSeq":3,"toolName":"sendWireTransfer","input":"{\"amount\":\"100\",\"to\":\"alice\"}"`,
		`"approved":true,"approverIdentity":"manager@company.com"`,
		`{"sagaId":"transfer-77","status":"COMPLETED","result":"transfer-ok",`,
		`"seq":6,"toolName":"sendWireTransfer","phase":"EXECUTED"`,
		`{"valid":true,"entryCount":6,"breakAtIndex":-1,"message":"all 6 entries verified`,
		"sagacity decision receipt v1\nsaga: transfer-77\nseq: 3\n",
	}
	cmds := walkthrough(t)
	if len(cmds) != len(wants) {
		t.Fatalf("README walkthrough has %d commands, the test knows %d: %q", len(cmds), len(wants), cmds)
	}
	for i, c := range cmds {
		c = strings.ReplaceAll(c, "localhost:8080", host)
		out, err := exec.Command("sh", "-c", c+" --fail-with-body").CombinedOutput()
		if err != nil || !strings.Contains(string(out), wants[i]) {
			t.Errorf("README step %d: %s\n= %v %s\nwant output containing %s", i+1, c, err, out, wants[i])
		}
	}
	for _, err := range proxy.Errors() {
		t.Errorf("the walkthrough departs from the OpenAPI document: %v", err)
	}
}
