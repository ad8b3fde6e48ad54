package evidence

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// ballotVector is one of testdata/passkey-ballots.json: a ballot's
// fields, the nonce of its ceremony, and what a passkey is asked to sign
// for them — the ballot's text, its SHA-256 and the challenge (base64url,
// as the client data carries it).
type ballotVector struct {
	Name   string `json:"name"`
	Ballot struct {
		Saga           string    `json:"saga"`
		Seq            int64     `json:"seq"`
		Entry          string    `json:"entry"`
		PayloadSHA256  string    `json:"payload-sha256"`
		Decision       Decided   `json:"decision"`
		Reason         string    `json:"reason,omitempty"`
		ApprovalPolicy string    `json:"approval-policy"`
		Rule           string    `json:"rule"`
		Voter          string    `json:"voter"`
		Credential     string    `json:"credential"`
		Time           time.Time `json:"time"`
	} `json:"ballot"`
	Nonce     string `json:"nonce"`
	Text      string `json:"text"`
	SHA256    string `json:"sha256"`
	Challenge string `json:"challenge"`
}

const ballotVectors = "testdata/passkey-ballots.json"

func readBallotVectors(t *testing.T) []ballotVector {
	t.Helper()
	b, err := os.ReadFile(ballotVectors)
	if err != nil {
		t.Fatal(err)
	}
	var vs []ballotVector
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatalf("%s: %v", ballotVectors, err)
	}
	return vs
}

// TestBallotVectors holds PasskeyBallot to the vectors of
// testdata/passkey-ballots.json, which anyone can recompute from the
// README's grammar (-update rewrites their text, digest and challenge).
func TestBallotVectors(t *testing.T) {
	vs := readBallotVectors(t)
	for i, v := range vs {
		f := v.Ballot
		b := PasskeyBallot{SagaID: f.Saga, Seq: f.Seq, Entry: f.Entry, PayloadSHA256: f.PayloadSHA256, Decision: f.Decision,
			Reason: f.Reason, ApprovalPolicy: f.ApprovalPolicy, Rule: f.Rule, Voter: f.Voter, Credential: f.Credential, Time: f.Time}
		nonce, err := base64.RawURLEncoding.DecodeString(v.Nonce)
		if err != nil || len(nonce) != 16 {
			t.Fatalf("%s: the nonce %q is not 16 bytes, base64url: %v", v.Name, v.Nonce, err)
		}
		sum := sha256.Sum256([]byte(b.Text()))
		got := ballotVector{Text: b.Text(), SHA256: hex.EncodeToString(sum[:]), Challenge: base64.RawURLEncoding.EncodeToString(b.Challenge(nonce))}
		if *update {
			vs[i].Text, vs[i].SHA256, vs[i].Challenge = got.Text, got.SHA256, got.Challenge
			continue
		}
		if got.Text != v.Text || got.SHA256 != v.SHA256 || got.Challenge != v.Challenge {
			t.Errorf("%s: the ballot of %+v, nonce %s =\n%q\nsha256 %s, challenge %s;\nwant\n%q\nsha256 %s, challenge %s",
				v.Name, f, v.Nonce, got.Text, got.SHA256, got.Challenge, v.Text, v.SHA256, v.Challenge)
		}
	}
	if *update {
		b, err := json.MarshalIndent(vs, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(ballotVectors, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// docPage is the text of the one documentation page (README.md or a
// page of docs/) that holds s. (testkit, which finds the blocks of those
// pages, imports this package.)
func docPage(t *testing.T, s string) (file, text string) {
	t.Helper()
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range append([]string{"../README.md"}, docs...) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), s) {
			if file != "" {
				t.Fatalf("%s and %s both hold %q", file, path, s)
			}
			file, text = path, string(b)
		}
	}
	if file == "" {
		t.Fatalf("neither README.md nor docs/*.md holds %q", s)
	}
	return file, text
}

// TestReadmeBallot holds the documentation's account of a passkey ballot
// to the code: its table of keys to the lines of a ballot, in order, and
// its worked example to the first vector: the text, then its SHA-256, the
// nonce and the challenge.
func TestReadmeBallot(t *testing.T) {
	v := readBallotVectors(t)[0]
	file, page := docPage(t, "\n<!-- passkey ballot:")
	block := func(name string) string {
		_, rest, ok := strings.Cut(page, "\n<!-- "+name)
		if ok {
			_, rest, ok = strings.Cut(rest, "\n```text\n")
		}
		block, _, ok2 := strings.Cut(rest, "```")
		if !ok || !ok2 {
			t.Fatalf("%s has no text block after <!-- %s", file, name)
		}
		return block
	}
	heading := regexp.MustCompile(`\n#+ The ballot and its challenge\n`).FindStringIndex(page)
	if heading == nil {
		t.Fatalf("%s has no heading The ballot and its challenge", file)
	}
	grammar, _, _ := strings.Cut(page[heading[1]:], "\n<!-- passkey ballot:")
	var keys, lines []string
	for _, l := range strings.Split(grammar, "\n") {
		if k, ok := strings.CutPrefix(l, "| `"); ok {
			k, _, _ = strings.Cut(k, "`")
			keys = append(keys, k)
		}
	}
	for _, l := range strings.Split(strings.TrimSuffix(v.Text, "\n"), "\n")[1:] {
		k, _, _ := strings.Cut(l, ": ")
		lines = append(lines, k)
	}
	if !slices.Equal(keys, lines) {
		t.Errorf("%s's ballot keys = %v; want the ballot's lines, in order: %v", file, keys, lines)
	}
	if got := block("passkey ballot:"); got != v.Text {
		t.Errorf("%s's ballot =\n%q\nwant the text of %s's vector %q\n%q", file, got, ballotVectors, v.Name, v.Text)
	}
	want := "sha256:    " + v.SHA256 + "\nnonce:     " + v.Nonce + "\nchallenge: " + v.Challenge + "\n"
	if got := block("passkey challenge:"); got != want {
		t.Errorf("%s's challenge =\n%s\nwant\n%s", file, got, want)
	}
}
