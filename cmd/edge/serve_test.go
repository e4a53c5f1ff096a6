package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// logLines returns every JSON line the process logged.
func (p *proc) logLines() []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// stop sends SIGTERM and waits for the exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v; stderr:\n%s", err, p.stderr)
		}
		p.done <- nil // for Cleanup
	case <-time.After(20 * time.Second):
		t.Fatalf("no exit after SIGTERM; stderr:\n%s", p.stderr)
	}
}

func strs(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, s := range l {
			out = append(out, fmt.Sprint(s))
		}
	}
	return out
}

// TestRunStartsAndStopsCleanly: `edge run FILE` and `edge run -config
// FILE` both serve; the log says the version, each site, the policy and
// the logs; SIGTERM with nothing in flight (or one idle keep-alive
// connection) drains at once, says the timeout in seconds and stopped,
// and no drain_incomplete.
func TestRunStartsAndStopsCleanly(t *testing.T) {
	t.Parallel()
	up := slowUpstream(t, "a", nil, nil)
	for _, tt := range []struct {
		name string
		form func(path string) []string
		idle bool
	}{
		{"run FILE", func(p string) []string { return []string{"run", p} }, false},
		{"run -config FILE", func(p string) []string { return []string{"run", "-config", p} }, false},
		{"run FILE, an idle connection", func(p string) []string { return []string{"run", p} }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := writeFile(t, dir, "edge.yaml", fmt.Sprintf(`listen: { https: "127.0.0.1:0", http: "", admin: "", http3: false }
tls: { mode: self-signed, cache: %q }
timeouts: { drain: 7s }
log: { fingerprints: %q }
sites:
  - hosts: [site.test, www.site.test]
    upstream: %s
  - hosts: [static.test]
    root: %q
`, filepath.Join(dir, "state"), filepath.Join(dir, "logs", "fp.jsonl"), up.URL, dir))
			p := startEdgeProcess(t, tt.form(cfg)...)
			https, _ := p.waitLog(t, "listening")["https"].(string)
			if tt.idle {
				c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
					TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
				if code, _, err := fetch(c, "https://"+https+"/"); err != nil || code != 200 {
					t.Fatalf("request: %d %v", code, err)
				}
				defer c.CloseIdleConnections() // open across SIGTERM
			}
			p.stop(t)

			byMsg := map[string][]map[string]any{}
			for _, l := range p.logLines() {
				msg, _ := l["msg"].(string)
				byMsg[msg] = append(byMsg[msg], l)
			}
			if s := byMsg["starting"]; len(s) != 1 || s[0]["version"] == "" || s[0]["go"] == "" {
				t.Errorf("starting: %v", s)
			}
			sites := byMsg["site"]
			if len(sites) != 2 || !slices.Equal(strs(sites[0]["hosts"]), []string{"site.test", "www.site.test"}) ||
				!slices.Equal(strs(sites[0]["upstreams"]), []string{up.URL}) || sites[0]["tls"] != "self-signed" ||
				sites[1]["root"] != dir {
				t.Errorf("site lines: %v", sites)
			}
			if pol := byMsg["policy"]; len(pol) != 1 || pol[0]["file"] != "(built-in default)" || pol[0]["rules"].(float64) < 10 {
				t.Errorf("policy line: %v", pol)
			}
			if logs := byMsg["logs"]; len(logs) != 1 || logs[0]["fingerprints"] != filepath.Join(dir, "logs", "fp.jsonl") {
				t.Errorf("logs line: %v", logs)
			}
			if d := byMsg["draining"]; len(d) != 1 || d[0]["timeout_seconds"] != 7.0 {
				t.Errorf("draining: %v", d)
			}
			if len(byMsg["stopped"]) != 1 || len(byMsg["drain_incomplete"]) != 0 || len(byMsg["server_failed"]) != 0 {
				t.Errorf("want stopped and nothing incomplete or failed:\n%s", p.stderr)
			}
			if _, err := os.Stat(filepath.Join(dir, "logs", "fp.jsonl")); err != nil {
				t.Errorf("the fingerprint log's directory was not made: %v", err)
			}
		})
	}
}

// TestReloadSaysWhatChanged: SIGHUP with a site added, one removed, one
// changed and another policy logs each, and the policy's rule count.
func TestReloadSaysWhatChanged(t *testing.T) {
	t.Parallel()
	up := slowUpstream(t, "a", nil, nil)
	dir := t.TempDir()
	pol := writeFile(t, dir, "policy.yaml", "bots:\n  - name: all\n    path_regex: .*\n    action: ALLOW\n")
	write := func(sites, policy string) string {
		return writeFile(t, dir, "edge.yaml", fmt.Sprintf(`listen: { https: "127.0.0.1:0", http: "", admin: "", http3: false }
tls: { mode: self-signed, cache: "" }
log: { fingerprints: off }
policy: %q
sites:
%s`, policy, sites))
	}
	site := func(host, upstream string) string {
		return fmt.Sprintf("  - hosts: [%s]\n    upstream: %s\n", host, upstream)
	}
	cfg := write(site("keep.test", up.URL)+site("change.test", up.URL)+site("gone.test", up.URL), "")
	p := startEdgeProcess(t, "run", cfg)
	p.waitLog(t, "listening")
	write(site("keep.test", up.URL)+site("change.test", up.URL+"/v2")+site("new.test", up.URL), pol)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	r := p.waitLog(t, "reloaded")
	if !slices.Equal(strs(r["sites_added"]), []string{"new.test"}) || !slices.Equal(strs(r["sites_removed"]), []string{"gone.test"}) ||
		!slices.Equal(strs(r["sites_changed"]), []string{"change.test"}) || r["policy_changed"] != true ||
		r["policy_file"] != pol || r["policy_rules"] != 1.0 {
		t.Errorf("reloaded: %v", r)
	}
	p.stop(t)
}

// TestConfigCheckCommand: ok for a good file and nothing written; every
// problem of a bad one with file, line and key; a log directory the user
// cannot write is reported.
func TestConfigCheckCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	good := writeFile(t, dir, "good.yaml", fmt.Sprintf(`tls: { mode: self-signed, cache: %q }
log: { fingerprints: %q }
sites: [{ hosts: [a.test], upstream: "http://127.0.0.1:1" }]
`, state, filepath.Join(dir, "logs", "fp.jsonl")))
	for _, args := range [][]string{{"config", "check", good}, {"config", "check", "-config", good}} {
		out, errOut, code := edgeRun(t, "", args...)
		if code != 0 || out != good+": ok\n" {
			t.Errorf("%v: exit %d, %q %q", args, code, out, errOut)
		}
	}
	for _, p := range []string{state, filepath.Join(dir, "logs")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("config check made %s", p)
		}
	}

	bad := writeFile(t, dir, "bad.yaml", `listen:
  https: ":99443"
tls: { mode: files, cert_file: /nonexistent/cert.pem, key_file: /nonexistent/key.pem }
policy: /nonexistent/policy.yaml
sites:
  - hosts: [a.example]
    upstream: 127.0.0.1:3000
    canonnical: a.example
  - hosts: [a.example]
    upstream: http://127.0.0.1:3001
    access_log: { path: /nonexistent/access.log }
`)
	_, errOut, code := edgeRun(t, "", "config", "check", bad)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, w := range []string{
		bad + ":2: listen.https: port \"99443\"",
		bad + ":3: tls: certs:",
		bad + ":4: policy: open /nonexistent/policy.yaml",
		bad + ":7: sites[0].upstream: upstream \"127.0.0.1:3000\" has no scheme: add http://",
		bad + ":8: sites[0].canonnical: unknown key; did you mean canonical?",
		bad + ":9: sites[1].hosts[0]: host \"a.example\" is already used by sites[0]",
		bad + ":11: sites[1].access_log.path: directory /nonexistent does not exist",
	} {
		if !strings.Contains(errOut, "edge: "+w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
	checkPrefixes(t, errOut)
}

// TestConfigCheckAsAnotherUser: run as a user who cannot write the log
// directory's parent (nobody, when the tests run as root), the check says
// which directory that user cannot write.
func TestConfigCheckAsAnotherUser(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "config", "check")
	cmd.Env = append(os.Environ(), "EDGE_TEST_MAIN=1")
	var dir string
	uid := os.Getuid()
	if os.Geteuid() == 0 {
		dir, uid = asNobody(t, cmd), 65534 // nobody may read it, not write it
	} else {
		dir = t.TempDir()
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
	}
	cfg := writeFile(t, dir, "edge.yaml", fmt.Sprintf(`tls: { mode: self-signed, cache: "" }
log: { fingerprints: %q }
sites: [{ hosts: [a.test], upstream: "http://127.0.0.1:1" }]
`, filepath.Join(dir, "logs", "fp.jsonl")))
	if uid != 65534 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Args = append(cmd.Args, cfg)
	out, err := cmd.CombinedOutput()
	want := fmt.Sprintf("log.fingerprints: directory %s does not exist and cannot be made: directory %s is not writable by user %d",
		filepath.Join(dir, "logs"), dir, uid)
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("%v:\n%s\nwant %q", err, out, want)
	}
}
