package api

import (
	"context"
	"embed"
	"fmt"
	"net/http"

	"github.com/getkin/kin-openapi/openapi3"
)

// The /docs page renders the spec with Redoc's standalone bundle, vendored
// in api/docs (npm package redoc, pinned in package.json; `npm run
// docs:vendor` refreshes the copy) and embedded, so the page works with no
// internet: the HTML page loads the script from /docs/redoc.standalone.js
// and the spec from /openapi.yaml, both from this server, by relative
// URLs (so they work behind a path prefix too).

//go:embed docs/index.html docs/redoc.standalone.js
var docsFS embed.FS

// docsCSP lets the page run the script and spec of this server only:
// Redoc injects its styles, draws icons as data: URIs, and runs its search
// index in a worker it builds from a blob.
const docsCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func mustReadDocs(name string) []byte {
	b, err := docsFS.ReadFile(name)
	if err != nil {
		panic("api: embedded " + name + ": " + err.Error()) // go:embed guarantees it
	}
	return b
}

var (
	docsHTML  = mustReadDocs("docs/index.html")
	redocJS   = mustReadDocs("docs/redoc.standalone.js")
	redocETag = `"redoc-` + redocVersion + `"`
)

// redocVersion is the vendored bundle's version (package.json pins it).
const redocVersion = "2.5.4"

// checkSpec refuses a spec that does not load or validate: /openapi.yaml
// serves it and /docs renders it, so a broken one must stop the start.
func checkSpec(spec []byte) error {
	doc, err := openapi3.NewLoader().LoadFromData(spec)
	if err != nil {
		return fmt.Errorf("api: load openapi spec: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return fmt.Errorf("api: invalid openapi spec: %w", err)
	}
	return nil
}

// docsPage: GET /docs, the HTML page that renders the spec with Redoc.
func (s *Server) docsPage(w http.ResponseWriter, r *http.Request) error {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", docsCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(docsHTML)
	return nil
}

// redocScript: GET /docs/redoc.standalone.js, the vendored Redoc bundle.
// It changes only with the pinned version, so clients may cache it.
func (s *Server) redocScript(w http.ResponseWriter, r *http.Request) error {
	h := w.Header()
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("Cache-Control", "public, max-age=86400")
	h.Set("ETag", redocETag)
	h.Set("X-Content-Type-Options", "nosniff")
	if r.Header.Get("If-None-Match") == redocETag {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	_, _ = w.Write(redocJS)
	return nil
}
