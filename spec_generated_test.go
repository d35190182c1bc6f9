package pinstore_test

import (
	"bytes"
	"os"
	"testing"

	pinstore "github.com/pinstore/pinstore"
	"github.com/pinstore/pinstore/internal/specgen"
)

// TestSpecIsGenerated: the committed openapi.yaml is exactly what the
// route table, model's declarations and openapi-overlay.yaml make, so a
// new type, list or route cannot leave the spec behind.
func TestSpecIsGenerated(t *testing.T) {
	overlay, err := os.ReadFile("openapi-overlay.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := specgen.Generate(overlay)
	if err != nil {
		t.Fatalf("generate openapi.yaml: %v", err)
	}
	if bytes.Equal(pinstore.OpenAPI, want) {
		return
	}
	got, wantLines := bytes.Split(pinstore.OpenAPI, []byte("\n")), bytes.Split(want, []byte("\n"))
	line := 0
	for line < len(got) && line < len(wantLines) && bytes.Equal(got[line], wantLines[line]) {
		line++
	}
	at := func(lines [][]byte) string {
		if line < len(lines) {
			return string(lines[line])
		}
		return "(end of file)"
	}
	t.Fatalf("openapi.yaml is not what the declarations and openapi-overlay.yaml make: run go generate .\n"+
		"first difference, line %d:\n  committed: %s\n  generated: %s", line+1, at(got), at(wantLines))
}
