package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/pinstore/pinstore/cluster/fleet"
)

// TestFleetPageInBrowser opens /fleet from a real server following an
// etcd topology with two hosts, in headless Chromium, and watches it
// change without a reload: both hosts with their ranges; a move started
// from the CLI appears with its phase and its pass's progress, and once
// finished from the CLI it is gone and the range shows on its new host.
// A user token and no token get no fleet data, from the route or the
// page. A screenshot of each state goes to PINSTORE_TEST_ARTIFACTS.
func TestFleetPageInBrowser(t *testing.T) {
	bin := chromium(t)
	f := startEtcdFleet(t, 1, 1)
	s := f.servers[0]
	for i := range 4 {
		u := s.create("/v1/users", map[string]any{"username": fmt.Sprintf("fleet%d", i)})
		b := s.create("/v1/boards", map[string]any{"owner_id": u.ID, "name": "b"})
		s.create("/v1/pins", map[string]any{"board_id": b.ID})
	}

	// The route: no token 401, a user's token 403, no fleet data in either.
	user := s.create("/v1/users", map[string]any{"username": "fleetuser"})
	userTok := mintUserToken(t, user.ID, "1h")
	for _, c := range []struct {
		name, tok string
		want      int
	}{{"no token", "", http.StatusUnauthorized}, {"user token", userTok, http.StatusForbidden}} {
		req, _ := http.NewRequest(http.MethodGet, s.base+"/v1/admin/fleet", nil)
		if c.tok != "" {
			req.Header.Set("Authorization", "Bearer "+c.tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != c.want || strings.Contains(string(body), "ranges") || strings.Contains(string(body), "h1") {
			t.Fatalf("%s: %d %s, want %d and no fleet data", c.name, resp.StatusCode, body, c.want)
		}
	}
	r := s.must(http.StatusOK, http.MethodGet, "/v1/admin/fleet", nil)
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control %q", cc)
	}
	var st fleet.FleetStatus
	r.decode(t, &st)
	if len(st.Hosts) != 2 || len(st.Servers) != 1 || st.Servers[0].Version != st.Version || st.Move != nil {
		t.Fatalf("fleet before the move: %+v", st)
	}

	b := openFleetPage(t, bin, s.base)
	text, waitText, shot, signIn := b.text, b.waitText, b.shot, b.signIn
	if got := text("#fleet"); strings.Contains(got, "h0") {
		t.Fatalf("the page shows fleet data before sign-in: %q", got)
	}
	shot("signed-out")
	signIn(userTok)
	waitText("a user's token refused", "#signin-msg", func(s string) bool { return strings.Contains(s, "Refused") })
	if got := text("body"); strings.Contains(got, "h1") || strings.Contains(got, "0-3") {
		t.Fatalf("the page shows fleet data to a user: %q", got)
	}
	shot("refused")

	signIn(e2eAdminToken)
	hosts := waitText("both hosts and their ranges", "#hosts", func(s string) bool {
		return strings.Contains(s, "h0") && strings.Contains(s, "h1") && strings.Contains(s, "0-3") && strings.Contains(s, "4-7")
	})
	if !rowHas(hosts, "h0", "0-3") || !rowHas(hosts, "h1", "4-7") {
		t.Fatalf("hosts table:\n%s", hosts)
	}
	// Each host's row shows this server's queries to its master.
	for _, h := range []string{"h0", "h1"} {
		if !rowHas(hosts, h, "master: ", "/s", "errors/s", "p99", "queries") {
			t.Fatalf("hosts table without %s's queries:\n%s", h, hosts)
		}
	}
	waitText("no move yet", "#move", func(s string) bool { return strings.Contains(s, "no move in progress") })
	shot("two-hosts")

	// Start the move (left open: switched, the old copies kept) from the
	// CLI; the page shows it, with the last pass's progress.
	if out, err := runCmd(t, f.tools(), "move-shards", "--range", "0-3", "--to", "h1"); err != nil {
		t.Fatalf("move: %v\n%s", err, out)
	}
	mv := waitText("the open move with its progress", "#move", func(s string) bool {
		return strings.Contains(s, "0-3") && strings.Contains(s, "switched") && strings.Contains(s, "4/4 shards")
	})
	if !strings.Contains(mv, "rows/s") || !strings.Contains(mv, "0-3 on h0") {
		t.Fatalf("move on the page:\n%s", mv)
	}
	waitText("the range on its new host", "#hosts", func(s string) bool { return rowHas(s, "h1", "0-3") })
	shot("move-open")

	if out, err := runCmd(t, f.tools(), "move-shards", "--range", "0-3", "--to", "h1", "--finish"); err != nil {
		t.Fatalf("finish: %v\n%s", err, out)
	}
	waitText("the move finished", "#move", func(s string) bool { return strings.Contains(s, "no move in progress") })
	if hosts := text("#hosts"); !rowHas(hosts, "h1", "0-3") || !rowHas(hosts, "h1", "4-7") {
		t.Fatalf("hosts after the move:\n%s", hosts)
	}
	shot("move-finished")
}

// fleetBrowser is /fleet open in headless Chromium.
type fleetBrowser struct {
	text     func(sel string) string
	waitText func(what, sel string, ok func(string) bool) string
	shot     func(name string)
	signIn   func(tok string)
}

// openFleetPage opens base+"/fleet" in headless Chromium (bin) and waits
// for its sign-in form; the browser goes with the test.
func openFleetPage(t *testing.T, bin, base string) *fleetBrowser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelT)
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		p := filepath.Join(artifactDir(t), "fleet-"+name+".png")
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector(`+strconv.Quote(sel)+`)||{}).innerText||""`))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return s
	}
	// waitText waits until sel's text satisfies ok, polling the page as
	// it updates itself.
	waitText := func(what, sel string, ok func(string) bool) string {
		t.Helper()
		for {
			got := text(sel)
			if ok(got) {
				return got
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: %s says %q", what, sel, got)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	signIn := func(tok string) {
		t.Helper()
		waitText("the sign-in form", "#signin", func(s string) bool { return strings.Contains(s, "Sign in") })
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { document.getElementById("token").value = `+strconv.Quote(tok)+
			`; document.getElementById("form").requestSubmit(); return true })()`)); err != nil {
			t.Fatalf("sign in: %v", err)
		}
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/fleet")); err != nil {
		t.Fatal(err)
	}
	waitText("the sign-in form", "#signin", func(s string) bool { return strings.Contains(s, "Sign in") })
	return &fleetBrowser{text: text, waitText: waitText, shot: shot, signIn: signIn}
}

// TestFleetPageShowsStoppedReplica: with a map file and a host with a
// replica, the page shows the replica replicating, then, once STOP SLAVE
// runs on it, not replicating with its threads stopped, without a reload.
func TestFleetPageShowsStoppedReplica(t *testing.T) {
	bin := chromium(t)
	f := startReplFleet(t, nil, 1)
	r := f.hosts[0].replicas[0]
	s := startServerEnv(t, f.env)
	b := openFleetPage(t, bin, s.base)
	b.signIn(e2eAdminToken)
	b.waitText("the replica replicating", "#replicas", func(x string) bool {
		return rowHas(x, r.Addr(), "replicating", "IO Yes, SQL Yes") && !strings.Contains(x, "not replicating")
	})
	b.waitText("the host and its range", "#hosts", func(x string) bool { return rowHas(x, "a", "0-7") })
	if got := b.text("#servers"); !strings.Contains(got, "this server") {
		t.Fatalf("servers with a map file:\n%s", got)
	}
	b.shot("replica-replicating")
	r.Exec(t, "STOP SLAVE")
	b.waitText("the stopped replica", "#replicas", func(x string) bool {
		return rowHas(x, r.Addr(), "not replicating", "IO No, SQL No")
	})
	b.shot("replica-stopped")
	var st fleet.FleetStatus
	s.must(http.StatusOK, http.MethodGet, "/v1/admin/fleet", nil).decode(t, &st)
	if rp := st.Hosts[0].Replicas[0]; rp.Replicating || rp.ServesReads {
		t.Fatalf("stopped replica in /v1/admin/fleet: %+v", rp)
	}
	// What the alerts read: the replica's series, replicating 0 now.
	series := fmt.Sprintf(`{host="a",replica=%q}`, taddr(r))
	metrics := string(s.must(http.StatusOK, http.MethodGet, "/metrics", nil).Body)
	if !strings.Contains(metrics, "pinstore_replica_replicating"+series+" 0") || !strings.Contains(metrics, "pinstore_replica_lag_seconds"+series+" ") {
		t.Fatalf("/metrics lacks the stopped replica's series %s:\n%s", series, grepLines(metrics, "pinstore_replica_"))
	}
}

// grepLines is the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// rowHas reports whether a line of a table's text has every one of words.
func rowHas(table string, words ...string) bool {
	for l := range strings.SplitSeq(table, "\n") {
		all := true
		for _, w := range words {
			all = all && strings.Contains(l, w)
		}
		if all {
			return true
		}
	}
	return false
}
