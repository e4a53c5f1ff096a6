package testattack

import (
	"context"
	"fmt"
	"net/http"
)

// The place cases: a guarded path spelled otherwise (issue 33, item 1),
// and TRACE (item 8 of the list, the core-correctness issue's).

// AuthSpellings are the spellings of AuthPath ("/admin/") that the most
// lenient common upstreams (PHP, Java servlet containers, Node, a static
// server on a case-insensitive disk, IIS) read as that place: issue 33's
// nine, then ours.
var AuthSpellings = []string{
	"/ADMIN/", "/Admin/", "/admin", "/admin;x/", "/;/admin/", "/x/..;/admin/", "/admin./", "/admin%20/", "/%c0%afadmin/",
	"/x/%2e%2e/admin/", "/%2e%2e/admin/", "/%41dmin/", "/%61dmin/", "//admin/", "/admin%2f", "/\\admin\\", "/x/..\\admin/",
}

// HonestSpellings are paths honest clients ask for that are not behind
// AuthPath: beside it, percent-encoded as browsers and curl encode, with
// the parameters servlet containers add.
var HonestSpellings = []string{"/adminer/", "/Admin-Guide.html", "/docs/a%20b.txt", "/caf%C3%A9/", "/app;jsessionid=1", "/a/b/../c"}

// gateTryHeader carries a try's number to the upstream, which records it.
const gateTryHeader = "X-Gate-Try"

// gatePaths asks for each spelling of t.AuthPath without credentials over
// h1, h2 and h3, each spelling from an address of its own (the edge
// counts failed logins per client); one that reaches the upstream, or is
// answered 2xx, got through. Controls: /admin/ itself without
// credentials (must not get through) and with them (must), and
// HonestSpellings (must).
func gatePaths(ctx context.Context, t GateTarget, out *GateOutcome) error {
	if t.AuthPath != "/admin/" {
		return fmt.Errorf("testattack: the path cases expect basic auth on /admin/, not %q", t.AuthPath)
	}
	t.Upstream.Record(1000)
	try := 0
	ask := func(row *GateRow, k int, target string, header [][2]string) {
		for _, proto := range []string{"h1", "h2", "h3"} {
			try++
			id := fmt.Sprintf("paths-%d", try)
			r := GateRequest{Proto: proto, Target: target, From: source(blockGatePaths, k),
				Header: append([][2]string{{"User-Agent", "Go-http-client/1.1"}, {gateTryHeader, id}}, header...)}
			_, _ = t.sendAndJudge(ctx, row, r, func(a Answer) bool {
				through := a.Status/100 == 2 || t.reachedTry(id)
				return through != row.Honest // an honest try is bad when it did not get through
			})
		}
	}
	ask(out.Attack("/admin/ (the control)", "401"), 0, "/admin/", nil)
	for i, s := range AuthSpellings {
		expected := "401 or 400"
		if s == "/admin" {
			expected = "401, 400 or a redirect to /admin/"
		}
		ask(out.Attack(s, expected), i+1, s, nil)
	}
	k := len(AuthSpellings) + 1
	basic := [][2]string{{"Authorization", "Basic " + basicAuth(AuthUser, t.AuthPassword)}}
	ask(out.Honest("/admin/ with the password", "200"), k, "/admin/", basic)
	// Honest paths near the guarded one, or spelled as honest clients
	// spell them, that a stricter path model must not refuse.
	for i, p := range HonestSpellings {
		ask(out.Honest(p+" (not guarded)", "200"), k+1+i, p, nil)
	}
	return nil
}

// reachedTry reports whether the upstream saw the try id.
func (t Target) reachedTry(id string) bool {
	for _, s := range t.Upstream.Seen() {
		if s.Header.Get(gateTryHeader) == id {
			return true
		}
	}
	return false
}

// basicAuth is the credentials of an Authorization: Basic field.
func basicAuth(user, password string) string {
	r, _ := http.NewRequest("GET", "/", nil)
	r.SetBasicAuth(user, password)
	return r.Header.Get("Authorization")[len("Basic "):]
}

// gateTrace sends TRACE over h1, h2 and h3: one forwarded (the upstream
// saw it) or answered 2xx got through.
func gateTrace(ctx context.Context, t GateTarget, out *GateOutcome) error {
	t.Upstream.Record(1000)
	row := out.Attack("TRACE /gate/trace/…", "405")
	for i, proto := range []string{"h1", "h2", "h3"} {
		target := "/gate/trace/" + proto
		r := GateRequest{Proto: proto, Method: "TRACE", Target: target, From: source(blockGateTrace, i),
			Header: [][2]string{{"User-Agent", "Go-http-client/1.1"}, {"Cookie", "session=secret"}}}
		_, _ = t.sendAndJudge(ctx, row, r, func(a Answer) bool { return t.passed(a, target) })
	}
	return nil
}
