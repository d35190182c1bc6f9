package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/api"
)

// chromium finds a headless-capable Chromium. Without one the test skips,
// and fails when CI=true (.ci/run installs it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH (CI=true): install it (apt-get install -y chromium), as .ci/run does")
	}
	t.Skip("no chromium on PATH: install it (apt-get install -y chromium) to render /docs in a browser")
	return ""
}

// artifactDir is where tests keep files for people to look at:
// PINSTORE_TEST_ARTIFACTS, default the system's temporary directory.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("PINSTORE_TEST_ARTIFACTS")
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// headless runs Chromium headless on url with args, giving the page's
// scripts budget of virtual time, and returns its standard output.
func headless(t *testing.T, bin, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	all := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--no-default-browser-check", "--disable-extensions",
		"--user-data-dir=" + t.TempDir(),
		"--virtual-time-budget=30000", "--run-all-compositor-stages-before-draw",
	}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, url)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, stderr.String())
	}
	return string(out)
}

// textEscaper escapes text as a browser's DOM dump does (quotes stay).
var textEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// TestDocsInBrowser loads /docs from the real server in headless Chromium
// and checks what a reader sees: Redoc ran (it fetched its script and the
// spec from the server), every operation's summary is on the page, the
// Markdown of the descriptions is rendered (bold as <strong>, no raw
// "**"), and each error code has the section a problem's type points to
// (/docs#tag/errors/<code>). A screenshot is kept in PINSTORE_TEST_ARTIFACTS.
func TestDocsInBrowser(t *testing.T) {
	bin := chromium(t)
	s := startServer(t)
	url := s.base + "/docs"

	dom := headless(t, bin, url, "--dump-dom")
	if !strings.Contains(dom, "redoc-wrap") {
		t.Fatalf("Redoc did not render /docs (no redoc-wrap in the DOM); DOM starts:\n%.2000s", dom)
	}
	spec := s.client.Transport.(*specTransport).doc
	ops := 0
	for _, path := range spec.Paths.Keys() {
		for method, op := range spec.Paths.Value(path).Operations() {
			ops++
			if !strings.Contains(dom, textEscaper.Replace(op.Summary)) {
				t.Errorf("the rendered page lacks the summary %q of %s %s", op.Summary, method, path)
			}
		}
	}
	// Markdown rendered: the spec's bold paragraph leads render as
	// <strong>, and no "**" is left raw in the text.
	for _, bold := range []string{"Errors", "Compatibility", "Bodies"} {
		if !strings.Contains(spec.Info.Description, "**"+bold+"**") {
			t.Fatalf("the spec no longer has **%s**: pick another bold phrase", bold)
		}
		if !strings.Contains(dom, "<strong>"+bold+"</strong>") {
			t.Errorf("**%s** is not rendered as <strong>", bold)
		}
	}
	text := regexp.MustCompile(`(?s)<script.*?</script>|<style.*?</style>|<[^>]*>`).ReplaceAllString(dom, " ")
	if i := strings.Index(text, "**"); i >= 0 {
		t.Errorf("raw Markdown on the page: %q", text[max(0, i-60):min(len(text), i+60)])
	}
	// Each error code's section, where problem types point.
	codes := regexp.MustCompile(`(?m)^## ([a-z_]+)$`).FindAllStringSubmatch(spec.Tags.Get("errors").Description, -1)
	if len(codes) < 10 {
		t.Fatalf("only %d error sections in the spec's errors tag", len(codes))
	}
	for _, c := range codes {
		anchor := strings.TrimPrefix(api.ProblemType(c[1]), "/docs#")
		if !strings.Contains(dom, `id="`+anchor+`"`) {
			t.Errorf("no element with id %q: the problem type %s leads nowhere", anchor, api.ProblemType(c[1]))
		}
	}
	t.Logf("/docs rendered %d operations and %d error sections (%d bytes of DOM)", ops, len(codes), len(dom))

	shot := filepath.Join(artifactDir(t), "pinstore-docs-"+time.Now().UTC().Format("20060102T150405")+".png")
	headless(t, bin, url, "--window-size=1280,1600", "--screenshot="+shot)
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10<<10 {
		t.Fatalf("screenshot %s: %v (%v)", shot, err, fi)
	}
	t.Logf("screenshot of /docs: %s", shot)
}
