package edge

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// consolePolicy allows, challenges and denies by path, so that a burst of
// each is easy to send.
const consolePolicy = `bots:
  - {name: deny-path, path_regex: ^/deny/, action: DENY}
  - {name: challenge-path, path_regex: ^/challenge/, action: CHALLENGE, challenge: {algorithm: fast, difficulty: 1}}
  - {name: allow-rest, path_regex: ., action: ALLOW}
`

// startConsoleEdge starts an edge with consolePolicy in front of an echo
// upstream, with more keys of listen and of the file.
func startConsoleEdge(t *testing.T, listen, yamlText string) *testEdge {
	t.Helper()
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte(consolePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	up := echoUpstream(t, "a")
	return startEdgeListen(t, listen, "policy: "+pol+"\nsites: [{hosts: [localhost], upstream: "+up.URL+"}]\n"+yamlText, io.Discard)
}

// burst sends n requests of each kind: allowed, challenged and denied.
func burst(t *testing.T, e *testEdge, n int) {
	t.Helper()
	c := e.client(t, "h1")
	for i := range n {
		for _, kind := range []string{"allow", "challenge", "deny"} {
			res, _ := get(t, c, e.url("/"+kind+"/"+strconv.Itoa(i)))
			if want := map[string]int{"allow": 200, "challenge": 403, "deny": 403}[kind]; res.StatusCode != want {
				t.Fatalf("%s: status %d, want %d", kind, res.StatusCode, want)
			}
		}
	}
}

// adminGet gets path from the admin listener, with basic auth when user
// is not empty.
func adminGet(t *testing.T, e *testEdge, path, user, pass string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+e.Addrs().Admin+path, nil)
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// consoleTotal reads a row of the page's totals table.
func consoleTotal(body, name string) int {
	m := regexp.MustCompile(`</span>` + regexp.QuoteMeta(name) + `</th><td>([0-9\x{202f}]+)</td>`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(strings.ReplaceAll(m[1], "\u202f", ""))
	return n
}

// waitConsole polls the page until cond holds of its body, and returns it.
func waitConsole(t *testing.T, e *testEdge, user, pass string, cond func(string) bool) string {
	t.Helper()
	var body string
	waitFor(t, 10*time.Second, func() bool {
		_, body = adminGet(t, e, "/", user, pass)
		return cond(body)
	})
	return body
}

func TestConsolePage(t *testing.T) {
	t.Parallel()
	e := startConsoleEdge(t, "", "limits: {upstream_conns: 5}\n")
	burst(t, e, 3)
	want := func(n int) func(string) bool {
		return func(b string) bool {
			return consoleTotal(b, "allowed") == n && consoleTotal(b, "challenged") == n && consoleTotal(b, "denied") == n
		}
	}
	body := waitConsole(t, e, "", "", want(3))
	if !want(3)(body) {
		t.Fatalf("the page does not count 3 of each:\nallowed %d, challenged %d, denied %d",
			consoleTotal(body, "allowed"), consoleTotal(body, "challenged"), consoleTotal(body, "denied"))
	}
	for _, s := range []string{
		`<td>deny-path</td><td>3</td><td>0</td><td>0</td><td>3</td>`,
		`<td>challenge-path</td><td>3</td><td>0</td><td>3</td><td>0</td>`,
		`<td>localhost</td><td>9</td>`,
		`<td>127.0.0.1</td><td>9</td>`, // log.client_ip: full
		`<rect class="deny"`, `<rect class="allow"`, `<rect class="challenge"`,
		`<tr><th scope="row"><span class="line issued" aria-hidden="true"></span>issued</th><td>3</td></tr>`,
	} {
		if !strings.Contains(body, s) {
			t.Errorf("the page lacks %s", s)
		}
	}
	if !regexp.MustCompile(`<td>localhost</td><td>127\.0\.0\.1:[0-9]+</td><td>0 %</td><td>0</td><td>5</td><td>0</td>`).MatchString(body) {
		t.Error("the page lacks the upstream's row")
	}
	burst(t, e, 2)
	body = waitConsole(t, e, "", "", want(5))
	if !want(5)(body) {
		t.Errorf("more traffic did not change the page: allowed %d", consoleTotal(body, "allowed"))
	}
}

// TestConsolePrivacy: the page shows client addresses as log.client_ip
// says, never the raw one when the mode hides it.
func TestConsolePrivacy(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		mode, want string
	}{
		{"prefix", `<td>127.0.0.0/24</td>`},
		{"hash", `<table id="clients">`},
		{"none", `log.client_ip is “none”`},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			e := startConsoleEdge(t, "", "log: {client_ip: "+tt.mode+"}\n")
			burst(t, e, 1)
			body := waitConsole(t, e, "", "", func(b string) bool { return consoleTotal(b, "denied") == 1 })
			if !strings.Contains(body, tt.want) {
				t.Errorf("the page lacks %s", tt.want)
			}
			if strings.Contains(body, "<td>127.0.0.1</td>") {
				t.Errorf("log.client_ip %s: the page shows the client's address", tt.mode)
			}
			if tt.mode == "none" && strings.Contains(body, `id="clients"`) {
				t.Error("log.client_ip none: the page has a clients table")
			}
			if tt.mode == "hash" && !regexp.MustCompile(`<td>[0-9a-f]{24}</td><td>3</td>`).MatchString(body) {
				t.Error("log.client_ip hash: the page lacks the hashed client")
			}
		})
	}
}

// TestAdminAuth: listen.admin_auth guards the console and the metrics, not
// the probes.
func TestAdminAuth(t *testing.T) {
	t.Parallel()
	e := startConsoleEdge(t, `admin_auth: {user: ops, password: "correct horse battery"}`, "")
	for _, tt := range []struct {
		name, path, user, pass string
		want                   int
	}{
		{"console without credentials", "/", "", "", 401},
		{"console, wrong password", "/", "ops", "correct horse", 401},
		{"console, wrong user", "/", "op", "correct horse battery", 401},
		{"console", "/", "ops", "correct horse battery", 200},
		{"metrics without credentials", "/metrics", "", "", 401},
		{"metrics", "/metrics", "ops", "correct horse battery", 200},
		{"healthz stays open", "/healthz", "", "", 200},
		{"readyz stays open", "/readyz", "", "", 200},
	} {
		res, body := adminGet(t, e, tt.path, tt.user, tt.pass)
		if res.StatusCode != tt.want {
			t.Errorf("%s: status %d, want %d", tt.name, res.StatusCode, tt.want)
		}
		if tt.want == 401 {
			if !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Basic ") {
				t.Errorf("%s: WWW-Authenticate %q", tt.name, res.Header.Get("WWW-Authenticate"))
			}
			if strings.Contains(body, "maat_") || strings.Contains(body, "<table") {
				t.Errorf("%s: the 401 shows what it guards", tt.name)
			}
		}
	}
}

func TestSameSecret(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a, b string
		want bool
	}{{"", "", true}, {"x", "x", true}, {"x", "y", false}, {"x", "xx", false}, {"", "x", false}} {
		if got := sameSecret(tt.a, tt.b); got != tt.want {
			t.Errorf("sameSecret(%q, %q) = %v", tt.a, tt.b, got)
		}
	}
}

// TestAdminAuthReload: a reload that sets listen.admin_auth guards the
// console at once; one that removes it opens it again.
func TestAdminAuthReload(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	site := "sites: [{hosts: [localhost], upstream: " + up.URL + "}]\n"
	e := startEdgeListen(t, "", site, io.Discard)
	reload := func(listen string) {
		t.Helper()
		if err := reloadText(t, e.Server, listen, site); err != nil {
			t.Fatal(err)
		}
	}
	if res, _ := adminGet(t, e, "/", "", ""); res.StatusCode != 200 {
		t.Fatalf("without admin_auth: %d", res.StatusCode)
	}
	reload(`admin_auth: {user: ops, password: "correct horse battery"}`)
	if res, _ := adminGet(t, e, "/", "", ""); res.StatusCode != 401 {
		t.Errorf("after a reload that sets admin_auth: %d, want 401", res.StatusCode)
	}
	if res, _ := adminGet(t, e, "/", "ops", "correct horse battery"); res.StatusCode != 200 {
		t.Errorf("with the credentials: %d", res.StatusCode)
	}
	reload("")
	if res, _ := adminGet(t, e, "/metrics", "", ""); res.StatusCode != 200 {
		t.Errorf("after a reload that removes admin_auth: %d, want 200", res.StatusCode)
	}
}

// TestAdminPprof: listen.admin_pprof serves Go's profiles behind
// admin_auth; off (the default), /debug/pprof/ is a 404; a reload turns it
// on and off.
func TestAdminPprof(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	site := "sites: [{hosts: [localhost], upstream: " + up.URL + "}]\n"
	e := startEdgeListen(t, "", site, io.Discard)
	reload := func(listen string) {
		t.Helper()
		if err := reloadText(t, e.Server, listen, site); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/heap"} {
		if res, _ := adminGet(t, e, p, "", ""); res.StatusCode != 404 {
			t.Errorf("off by default: %s is %d, want 404", p, res.StatusCode)
		}
	}
	reload(`admin_pprof: true, admin_auth: {user: ops, password: "correct horse battery"}`)
	if res, body := adminGet(t, e, "/debug/pprof/heap?debug=1", "", ""); res.StatusCode != 401 || strings.Contains(body, "heap profile") {
		t.Errorf("without credentials: %d", res.StatusCode)
	}
	res, body := adminGet(t, e, "/debug/pprof/heap?debug=1", "ops", "correct horse battery")
	if res.StatusCode != 200 || !strings.Contains(body, "heap profile") {
		t.Errorf("heap profile with credentials: %d %.80q", res.StatusCode, body)
	}
	if res, body := adminGet(t, e, "/debug/pprof/", "ops", "correct horse battery"); res.StatusCode != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("index: %d %.80q", res.StatusCode, body)
	}
	reload("")
	if res, _ := adminGet(t, e, "/debug/pprof/heap?debug=1", "", ""); res.StatusCode != 404 {
		t.Errorf("after a reload that turns it off: %d, want 404", res.StatusCode)
	}
}
