package evidence

import "testing"

func TestEncodeText(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain text stays", `{"ok":true}`, `{"ok":true}`},
		{"empty stays", "", ""},
		{"unicode stays", "grüße ✓", "grüße ✓"},
		{"newlines and tabs stay", "a\nb\tc", "a\nb\tc"},
		{"NUL is encoded", "a\x00b", EncodedPrefix + "YQBi"},
		{"invalid UTF-8 is encoded", "\xff\xfe", EncodedPrefix + "//4="},
		{"the prefix itself is encoded", EncodedPrefix + "YQBi", EncodedPrefix + "c2FnYWNpdHktYmFzZTY0OllRQmk="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := EncodeText(tt.in)
			if got != tt.want {
				t.Errorf("EncodeText(%q) = %q, want %q", tt.in, got, tt.want)
			}
			back, err := DecodeText(got)
			if err != nil || back != tt.in {
				t.Errorf("DecodeText(%q) = %q, %v; want %q", got, back, err, tt.in)
			}
		})
	}
	if _, err := DecodeText(EncodedPrefix + "not base64!"); !isEvidence(err) {
		t.Errorf("DecodeText(bad base64) error = %v, want invalid", err)
	}
}
