package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDocsTrailingSlash: /docs/ sends the browser to /docs (the page's
// script is loaded relative to it), and a client that follows the
// redirect gets the page.
func TestDocsTrailingSlash(t *testing.T) {
	s, _, _ := newTestServer(t, &fakeStore{})
	w := do(s, "GET", "/docs/", "")
	if w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != "../docs" {
		t.Fatalf("GET /docs/: %d, Location %q", w.Code, w.Header().Get("Location"))
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/docs/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/docs" || !strings.Contains(string(body), "redoc.standalone.js") {
		t.Fatalf("following /docs/: %d at %s", resp.StatusCode, resp.Request.URL.Path)
	}
	if w := do(s, "GET", "/docs/nothing", ""); w.Code != http.StatusNotFound {
		t.Fatalf("GET /docs/nothing: %d", w.Code)
	}
}
