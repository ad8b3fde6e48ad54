package engine

import (
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

func TestKeys(t *testing.T) {
	for range 20 { // key data that holds '+' and '/' included
		skey, vkey, err := GenerateKeys("sagacity.example.com")
		if err != nil {
			t.Fatal(err)
		}
		k, err := NewKeys(skey + "\n")
		if err != nil || k.VerifierKey() != vkey || k.Name() != "sagacity.example.com" {
			t.Fatalf("NewKeys(%q) = %v, %v; want the verifier key %q", skey, k, err, vkey)
		}
		signed, err := k.Sign("hello\n")
		if err != nil {
			t.Fatal(err)
		}
		v, _ := note.NewVerifier(vkey)
		if n, err := note.Open([]byte(signed), note.VerifierList(v)); err != nil || n.Text != "hello\n" {
			t.Fatalf("note.Open(Sign(hello)) = %v, %v", n, err)
		}
	}
	for _, bad := range []string{"", "sagacity+0ac935d1+AdKiK3O/PLawPqlsHMQqYEF4kxMdCZBsYA/WsTU00r1J", "PRIVATE+KEY+x+00000000+AAAA"} {
		if _, err := NewKeys(bad); !IsKind(err, Invalid) || strings.Contains(err.Error(), bad+"x") {
			t.Errorf("NewKeys(%q) = %v, want invalid", bad, err)
		}
	}
}
