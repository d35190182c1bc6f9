// Command specgen writes openapi.yaml from the route table, model's
// declarations and openapi-overlay.yaml (internal/specgen). Run it from
// the repository's root, as go generate does:
//
//	go generate .
package main

import (
	"fmt"
	"os"

	"github.com/pinstore/pinstore/internal/specgen"
)

func main() {
	if err := run("openapi-overlay.yaml", "openapi.yaml"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run reads the overlay at in and writes the spec to out, only when it
// changes.
func run(in, out string) error {
	overlay, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	spec, err := specgen.Generate(overlay)
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(out); err == nil && string(old) == string(spec) {
		return nil
	}
	return os.WriteFile(out, spec, 0o644)
}
