package edge

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maatproxy/maat/internal/testenv"
)

func (l fpLine) rules() []string {
	var out []string
	rs, _ := l["rules"].([]any)
	for _, r := range rs {
		s, _ := r.(string)
		out = append(out, s)
	}
	return out
}

const (
	chromeUA  = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
	firefoxUA = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"
	googleUA  = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	gptUA     = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)"
	feedUA    = "Mozilla/5.0 (compatible; Miniflux/2.2.4; +https://miniflux.app)"
)

// TestPolicyEndToEnd drives real clients through the edge with the default
// policy and reads the decisions from the fingerprint log.
func TestPolicyEndToEnd(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	e, fpFile := startLoggingEdge(t, up.URL)
	port := port(e.Addrs().HTTPS)
	base := "https://localhost:" + port
	curl := func(t *testing.T, path string, args ...string) {
		t.Helper()
		bin := testenv.NeedCommand(t, "curl")
		a := append([]string{"-sk", "--max-time", "10", "-o", "/dev/null", "--resolve", "localhost:" + port + ":127.0.0.1"}, args...)
		if out, err := exec.Command(bin, append(a, base+path)...).CombinedOutput(); err != nil {
			t.Fatalf("curl: %v %s", err, out)
		}
	}
	type want struct {
		actions []string // one of
		rule    string   // must be among rules ("" = no check)
	}
	check := func(t *testing.T, path string, w want) {
		t.Helper()
		l := waitLine(t, fpFile, path)
		if !slices.Contains(w.actions, l.str("action")) {
			t.Errorf("%s: action %s (rules %v, weight %v), want one of %v", path, l.str("action"), l.rules(), l["weight"], w.actions)
		}
		if w.rule != "" && !slices.Contains(l.rules(), w.rule) {
			t.Errorf("%s: rules %v lack %s", path, l.rules(), w.rule)
		}
	}
	t.Run("curl as itself", func(t *testing.T) {
		curl(t, "/p/curl")
		check(t, "/p/curl", want{actions: []string{"ALLOW"}})
	})
	t.Run("curl with a Chrome UA", func(t *testing.T) {
		curl(t, "/p/curl-chrome", "-A", chromeUA)
		check(t, "/p/curl-chrome", want{actions: []string{"CHALLENGE", "DENY"}, rule: "ua_tls_mismatch"})
	})
	t.Run("python with a Firefox UA", func(t *testing.T) {
		py := testenv.NeedCommand(t, "python3")
		script := `import ssl,sys,urllib.request
ctx=ssl.create_default_context(); ctx.check_hostname=False; ctx.verify_mode=ssl.CERT_NONE
req=urllib.request.Request(sys.argv[1], headers={"User-Agent": sys.argv[2]})
try: urllib.request.urlopen(req, context=ctx, timeout=10)
except urllib.error.HTTPError: pass`
		cmd := exec.Command(py, "-c", script, base+"/p/python-firefox", firefoxUA)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("python: %v %s", err, out)
		}
		check(t, "/p/python-firefox", want{actions: []string{"CHALLENGE", "DENY"}, rule: "ua_tls_mismatch"})
	})
	t.Run("go with a Googlebot UA", func(t *testing.T) {
		get(t, e.client(t, "h2"), e.url("/p/go-googlebot"), "User-Agent", googleUA)
		check(t, "/p/go-googlebot", want{actions: []string{"CHALLENGE", "DENY"}, rule: "fake_crawler"})
	})
	t.Run("GPTBot", func(t *testing.T) {
		curl(t, "/p/gptbot", "-A", gptUA)
		check(t, "/p/gptbot", want{actions: []string{"DENY"}})
	})
	t.Run("feed reader", func(t *testing.T) {
		curl(t, "/feed.xml", "-A", feedUA, "-H", "Accept: application/atom+xml, application/rss+xml")
		check(t, "/feed.xml", want{actions: []string{"ALLOW"}})
	})
	t.Run("headless chromium", func(t *testing.T) {
		chromium := testenv.NeedCommand(t, "chromium", "chromium-browser")
		dir := t.TempDir()
		cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--ignore-certificate-errors", "--user-data-dir="+filepath.Join(dir, "profile"),
			"--host-resolver-rules=MAP localhost 127.0.0.1", "--dump-dom", base+"/p/chromium")
		cmd.Env = append(os.Environ(), "HOME="+dir)
		done := make(chan error, 1)
		out := &strings.Builder{}
		cmd.Stdout = out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		check(t, "/p/chromium", want{actions: []string{"CHALLENGE"}})
	})
}
