package pinstore

// The documents' commands, run as a reader runs them. Every fenced code
// block of README.md, CONTRIBUTING.md and every docs/**/*.md says what it
// holds in its info string (```sh, ```yaml …); the shell blocks (sh,
// bash, shell) are commands, and this test runs each of them, file by
// file (README.md, CONTRIBUTING.md, then docs/ in path order) and in each
// file in order, in a scratch copy of the repository (the files a clone
// has: `git ls-files`, plus new files not ignored), against the real
// MariaDB and Redis, so a documented command that stops working fails the
// suite. A block that cannot run here is skipped only when an HTML comment
// on the line before it says so, with the reason:
//
//	<!-- readme-test: skip needs a Docker engine -->
//	<!-- readme-test: background -->
//
// "background" starts a block that runs until stopped (a server): the
// next block starts once a TCP address the block names answers, and the
// block is stopped (SIGTERM, then SIGKILL) when every block of its file
// has run. Any other comment before a block, or an annotation on a block
// that is not a shell block, fails the test, so annotations cannot rot.
//
// Each block runs in its own `bash -e -o pipefail`, from the copy's root:
// a block defines the variables it uses, as a reader's fresh shell would.
// Two rewrites keep a run private, so it never touches a reader's data and
// runs beside other test runs: the database prefix try_ (and try: in Redis
// key prefixes) becomes a prefix unique to the run (its databases and
// Redis keys are dropped at the end), and every loopback address on a port
// 8000-8999 (127.0.0.1:8080, localhost:8081) becomes a free port, the same
// one each time a block of the run names it.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pinstore/pinstore/internal/testenv"
)

// A readmeBlock is one fenced code block of a document.
type readmeBlock struct {
	line   int    // 1-based line of the opening fence
	lang   string // the info string's first word
	text   string // the block's lines, each ending in "\n"
	action string // "run", "background", "skip", or "" (not a shell block)
	reason string // why a block is skipped
}

// shellLangs are the info strings of blocks that hold commands.
var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true}

var (
	annotationRe = regexp.MustCompile(`^<!--\s*readme-test:\s*(\S+)\s*(.*?)\s*-->$`)
	fenceRe      = regexp.MustCompile("^(```+|~~~+)\\s*(\\S*)")
)

// parseReadme returns a document's fenced blocks with their annotations,
// or every mistake it finds: a block without a language, an annotation
// with no block after it, on a block that holds no commands, unknown, or
// a skip without a reason.
func parseReadme(text string) ([]readmeBlock, []string) {
	var blocks []readmeBlock
	var errs []string
	type pending struct {
		line           int
		action, reason string
	}
	var ann *pending
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if m := annotationRe.FindStringSubmatch(trimmed); m != nil {
			if ann != nil {
				errs = append(errs, fmt.Sprintf("line %d: readme-test annotation with no code block after it", ann.line))
			}
			ann = &pending{line: n, action: m[1], reason: m[2]}
			switch {
			case m[1] != "skip" && m[1] != "background":
				errs = append(errs, fmt.Sprintf("line %d: unknown readme-test annotation %q (skip REASON, or background)", n, m[1]))
			case m[1] == "skip" && len(strings.Fields(m[2])) < 2:
				errs = append(errs, fmt.Sprintf("line %d: a skip says why the block cannot run here, in a few words", n))
			case m[1] == "background" && m[2] != "":
				errs = append(errs, fmt.Sprintf("line %d: background takes no argument", n))
			}
			continue
		}
		fm := fenceRe.FindStringSubmatch(trimmed)
		if fm == nil {
			if trimmed != "" && ann != nil {
				errs = append(errs, fmt.Sprintf("line %d: readme-test annotation with no code block right after it", ann.line))
				ann = nil
			}
			continue
		}
		b := readmeBlock{line: n, lang: fm[2]}
		var body strings.Builder
		closed := false
		for sc.Scan() {
			n++
			if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, fm[1]) && strings.Trim(l, fm[1][:1]) == "" {
				closed = true
				break
			}
			body.WriteString(sc.Text() + "\n")
		}
		b.text = body.String()
		switch {
		case !closed:
			errs = append(errs, fmt.Sprintf("line %d: code block never closed", b.line))
		case b.lang == "":
			errs = append(errs, fmt.Sprintf("line %d: code block without a language: say what it holds (```sh for commands, ```yaml, ```text …)", b.line))
		case shellLangs[b.lang]:
			b.action = "run"
		}
		if ann != nil {
			if b.action == "" {
				errs = append(errs, fmt.Sprintf("line %d: readme-test annotation on a %q block, which holds no commands", ann.line, b.lang))
			} else {
				b.action, b.reason = ann.action, ann.reason
			}
			ann = nil
		}
		blocks = append(blocks, b)
	}
	if ann != nil {
		errs = append(errs, fmt.Sprintf("line %d: readme-test annotation with no code block after it", ann.line))
	}
	return blocks, errs
}

func TestParseReadme(t *testing.T) {
	text := strings.Join([]string{
		"# t", "",
		"```sh", "echo run", "```", "",
		"<!-- readme-test: background -->", "```bash", "serve", "```",
		"<!-- readme-test: skip needs Docker here -->", "```sh", "docker compose up", "```",
		"```yaml", "a: 1", "```",
		"````sh", "```", "nested", "````",
	}, "\n")
	blocks, errs := parseReadme(text)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var got []string
	for _, b := range blocks {
		got = append(got, fmt.Sprintf("%d %s %s %q %q", b.line, b.lang, b.action, b.reason, b.text))
	}
	want := []string{
		`3 sh run "" "echo run\n"`,
		`8 bash background "" "serve\n"`,
		`12 sh skip "needs Docker here" "docker compose up\n"`,
		`15 yaml  "" "a: 1\n"`,
		"18 sh run \"\" \"```\\nnested\\n\"",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, bad := range []string{
		"```\nno language\n```",
		"<!-- readme-test: skip -->\n```sh\nx\n```",
		"<!-- readme-test: skip one -->\n```sh\nx\n```",
		"<!-- readme-test: sometimes it runs -->\n```sh\nx\n```",
		"<!-- readme-test: background now -->\n```sh\nx\n```",
		"<!-- readme-test: skip no block follows -->\ntext\n```sh\nx\n```",
		"<!-- readme-test: skip not a shell block -->\n```yaml\na: 1\n```",
		"<!-- readme-test: skip at the end of the file -->\n",
		"```sh\nnever closed\n",
	} {
		if _, errs := parseReadme(bad); len(errs) == 0 {
			t.Errorf("no error for %q", bad)
		}
	}
}

// TestCIRunsTheREADMETestCommand: .ci/run runs exactly the command
// README.md's "Test it" section gives, its first block.
func TestCIRunsTheREADMETestCommand(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile(filepath.Join(".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^TEST_CMD="([^"]+)"$`).FindSubmatch(ci)
	if m == nil {
		t.Fatal(".ci/run sets no TEST_CMD=\"…\"")
	}
	_, section, ok := strings.Cut(string(readme), "\n## Test it\n")
	if !ok {
		t.Fatal("README.md has no \"Test it\" section")
	}
	blocks, _ := parseReadme(section)
	if len(blocks) == 0 {
		t.Fatal("README.md's \"Test it\" section has no code block")
	}
	if got := strings.TrimSpace(blocks[0].text); got != string(m[1]) {
		t.Fatalf(".ci/run runs %q; README.md's \"Test it\" gives %q", m[1], got)
	}
}

// blockTimeout bounds one foreground block, and how long a background
// block may take to answer (a first build of the binary included).
const blockTimeout = 10 * time.Minute

// commandDocs lists the documents whose shell blocks TestREADMECommands
// runs, in the order it runs them: README.md, CONTRIBUTING.md, then every
// Markdown file under docs/ in path order.
func commandDocs(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CONTRIBUTING.md"}
	var docs []string
	err := filepath.WalkDir("docs", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			docs = append(docs, filepath.ToSlash(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(docs)
	return append(files, docs...)
}

// TestREADMECommands runs the documents' shell blocks as the file's header
// comment says.
func TestREADMECommands(t *testing.T) {
	files := commandDocs(t)
	parsed := map[string][]readmeBlock{}
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		blocks, errs := parseReadme(string(text))
		for _, e := range errs {
			t.Errorf("%s %s", f, e)
		}
		parsed[f] = blocks
	}
	if t.Failed() {
		t.FailNow()
	}
	dsn, redisAddr := testenv.MySQLDSN(t), testenv.RedisAddr(t)
	for _, tool := range []string{"bash", "curl", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("the documents' commands need %s: %v", tool, err)
			}
			t.Skipf("the documents' commands need %s: %v", tool, err)
		}
	}
	prefix := testenv.UniquePrefix(t, "readme")
	t.Cleanup(func() {
		testenv.DropDatabases(t, dsn, prefix)
		testenv.DropKeys(t, redisAddr, prefix)
	})
	dir := cloneWorkTree(t)
	env := readmeEnv(dsn, redisAddr, prefix)
	var mu sync.Mutex
	ports := map[string]string{} // "8080" → a free port, for the whole run
	rewrite := func(t *testing.T, s string) string {
		s = strings.NewReplacer("try_", prefix, "try:", prefix).Replace(s)
		return loopbackRe.ReplaceAllStringFunc(s, func(addr string) string {
			mu.Lock()
			defer mu.Unlock()
			port := addr[strings.LastIndexByte(addr, ':')+1:]
			if ports[port] == "" {
				ports[port] = fmt.Sprint(testenv.FreePort(t))
			}
			return "127.0.0.1:" + ports[port]
		})
	}

	for _, f := range files {
		ran := 0
		t.Run(f, func(t *testing.T) {
			for _, b := range parsed[f] {
				where := fmt.Sprintf("%s:%d", f, b.line)
				switch b.action {
				case "":
					continue
				case "skip":
					t.Logf("%s: skipped: %s", where, b.reason)
					continue
				}
				script := rewrite(t, b.text)
				if b.action == "background" {
					var addrs []string // where the block serves, as rewritten
					for _, a := range loopbackRe.FindAllString(b.text, -1) {
						addrs = append(addrs, rewrite(t, a))
					}
					startBackground(t, where, dir, env, script, addrs)
				} else {
					runBlock(t, where, dir, env, script)
				}
				ran++
			}
		})
		if f == "README.md" && ran == 0 {
			t.Error("README.md has no shell block that runs here")
		}
	}
}

// loopbackRe matches the loopback addresses a block may name for a server
// of its own.
var loopbackRe = regexp.MustCompile(`\b(127\.0\.0\.1|localhost):8\d\d\d\b`)

// readmeEnv is the environment of every block: the test's own, less
// any PINSTORE_ variable, plus the servers the tests use and the run's
// private database and key prefixes (a block that sets its own prefix
// says try_, which the rewrite makes private too).
func readmeEnv(dsn, redisAddr, prefix string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PINSTORE_") {
			env = append(env, kv)
		}
	}
	return append(env,
		"PINSTORE_MYSQL_DSN="+dsn,
		"PINSTORE_REDIS_ADDRS="+redisAddr,
		"PINSTORE_DB_PREFIX="+prefix,
		"PINSTORE_REDIS_PREFIX="+prefix+"o:",
		"PINSTORE_OBJECT_CACHE_PREFIX="+prefix+"c:",
	)
}

// cloneWorkTree copies the files a clone of the repository has (tracked,
// and new files not ignored, as they are in the work tree) into a
// temporary directory, and returns it.
func cloneWorkTree(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("git ls-files: %v (README's commands run in a copy of what a clone holds)", err)
		}
		t.Skipf("git ls-files: %v (README's commands run in a copy of what a clone holds)", err)
	}
	dir := t.TempDir()
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src, err := os.Lstat(name)
		if err != nil || !src.Mode().IsRegular() {
			continue // deleted in the work tree, or a symlink or submodule
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, src.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// blockCmd is a block's bash, in its own process group so that stopping
// it stops what it started. A watchdog in that group kills the group when
// this test process is gone, so even a test binary killed by its timeout
// (which runs no cleanup) leaves no server behind.
func blockCmd(ctx context.Context, dir string, env []string, script string) *exec.Cmd {
	watchdog := fmt.Sprintf("( while kill -0 %d 2>/dev/null; do sleep 1; done; kill -KILL 0 ) </dev/null >/dev/null 2>&1 &\n", os.Getpid())
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", watchdog+script)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// runBlock runs a block to its end; it must exit 0 within blockTimeout.
func runBlock(t *testing.T, where, dir string, env []string, script string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), blockTimeout)
	defer cancel()
	var out bytes.Buffer
	cmd := blockCmd(ctx, dir, env, script)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the watchdog, and anything the block left running
	t.Logf("%s (%.1fs):\n%s\n%s", where, time.Since(start).Seconds(), indent(script, "$ "), indent(out.String(), "  "))
	if err != nil {
		t.Fatalf("%s: the block failed: %v", where, err)
	}
}

// lockedBuffer is a bytes.Buffer safe to read while a process writes it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startBackground starts a block that runs until stopped, waits until one
// of the loopback addresses it names (addrs) accepts a connection, and stops it
// (SIGTERM to its process group; SIGKILL after 20 s) when the test ends.
func startBackground(t *testing.T, where, dir string, env []string, script string, addrs []string) {
	t.Helper()
	if len(addrs) == 0 {
		t.Fatalf("%s: a background block names no loopback address to wait for", where)
	}
	var out lockedBuffer
	cmd := blockCmd(context.Background(), dir, env, script)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			t.Errorf("%s: still running 20s after SIGTERM", where)
		}
		t.Logf("%s (background):\n%s\n%s", where, indent(script, "$ "), indent(out.String(), "  "))
	})
	deadline := time.Now().Add(blockTimeout)
	for {
		for _, a := range addrs {
			if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
				c.Close()
				return
			}
		}
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			t.Fatalf("%s: the background block exited (%v) before %s answered:\n%s", where, err, strings.Join(addrs, " or "), out.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s did not answer within %s:\n%s", where, strings.Join(addrs, " or "), blockTimeout, out.String())
		}
	}
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return prefix + "(no output)"
	}
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}
