package edge

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"html"
	"log/slog"
	"math/bits"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maatproxy/maat/edge/config"
)

// pageAttr reads data-NAME="…" from a challenge page.
func pageAttr(t *testing.T, page, name string) string {
	t.Helper()
	m := regexp.MustCompile(`data-` + name + `="([^"]*)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no data-%s on the page:\n%.2000s", name, page)
	}
	return html.UnescapeString(m[1])
}

// solvePage does what the page's script does: finds, for each of k
// sub-puzzles, a nonce carrying its index in the top byte such that
// SHA-256(seed ‖ nonce) starts with the required zero bits, and returns
// the URL that redeems them.
func solvePage(t *testing.T, page string) string {
	t.Helper()
	seed := pageAttr(t, page, "seed")
	k, _ := strconv.Atoi(pageAttr(t, page, "k"))
	need, _ := strconv.Atoi(pageAttr(t, page, "bits"))
	nonces := make([]string, k)
	for i := range k {
		for n := uint64(i) << 56; ; n++ {
			var msg [72]byte
			copy(msg[:64], seed)
			binary.BigEndian.PutUint64(msg[64:], n)
			sum := sha256.Sum256(msg[:])
			if bits.LeadingZeros64(binary.BigEndian.Uint64(sum[:8])) >= need {
				nonces[i] = strconv.FormatUint(n, 16)
				break
			}
		}
	}
	return pageAttr(t, page, "pass") + "&n=" + strings.Join(nonces, ",")
}

// restartConfig is a configuration whose only state is dir: every request
// is challenged at 4 bits, and the fingerprint log hashes addresses.
func restartConfig(t *testing.T, dir, upstream string) config.Config {
	t.Helper()
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte("bots:\n  - name: everyone\n    path_regex: .*\n    action: CHALLENGE\n    challenge: {algorithm: fast, difficulty: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("restart.yaml", []byte(fmt.Sprintf(`listen: { https: "127.0.0.1:0", http: "", admin: "" }
tls: { mode: self-signed, cache: %q }
policy: %q
challenge: { wait: { max_weight: -1 } }
log: { fingerprints: %q, client_ip: hash }
sites: [{ hosts: [a.test], upstream: %s }]
`, filepath.Join(dir, "state"), policy, filepath.Join(dir, "fp.jsonl"), upstream)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// lifetime is one run of the edge: New, some requests, Shutdown.
func lifetime(t *testing.T, cfg config.Config, do func(h *Handler)) {
	t.Helper()
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	do(s.Handler())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSecretSurvivesRestart: without challenge.secret_file, a pass cookie
// earned before a restart still passes after it, and the hashed client
// address in the fingerprint log stays the same, because the secret was
// made once in the state directory. With another state directory neither
// holds.
func TestSecretSurvivesRestart(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	dir := t.TempDir()
	cfg := restartConfig(t, dir, up.URL)
	const req = "GET /page HTTP/1.1\r\nHost: a.test\r\nUser-Agent: restart-test\r\n"
	var cookie string
	lifetime(t, cfg, func(h *Handler) {
		w := serveRaw(t, h, req+"\r\n")
		if w.Code != http.StatusForbidden {
			t.Fatalf("first visit: %d, want the challenge", w.Code)
		}
		pass := serveRaw(t, h, "GET "+solvePage(t, w.Body.String())+" HTTP/1.1\r\nHost: a.test\r\n\r\n")
		for _, c := range pass.Result().Cookies() {
			cookie = c.Name + "=" + c.Value
		}
		if pass.Code != http.StatusSeeOther || cookie == "" {
			t.Fatalf("redeeming: %d, cookie %q", pass.Code, cookie)
		}
	})
	fi, err := os.Stat(filepath.Join(dir, "state", SecretFileName))
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 32 {
		t.Fatalf("secret file: %v %v", fi, err)
	}

	passes := func(cfg config.Config) bool {
		ok := false
		lifetime(t, cfg, func(h *Handler) {
			w := serveRaw(t, h, req+"Cookie: "+cookie+"\r\n\r\n")
			ok = w.Code == http.StatusOK && strings.Contains(w.Body.String(), "Path=/page")
		})
		return ok
	}
	if !passes(cfg) {
		t.Error("after a restart on the same state directory, the pass cookie is refused")
	}
	otherDir := t.TempDir()
	other := restartConfig(t, otherDir, up.URL)
	if passes(other) {
		t.Error("a pass cookie passed an edge with another secret")
	}

	// Every line of both lifetimes on the same directory logs the same
	// hashed address; the other directory's edge hashes it differently.
	ips := func(file string) map[string]bool {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			var l struct {
				IP string `json:"remote_ip"`
			}
			if err := json.Unmarshal(line, &l); err != nil {
				t.Fatal(err)
			}
			m[l.IP] = true
		}
		return m
	}
	same, diff := ips(filepath.Join(dir, "fp.jsonl")), ips(filepath.Join(otherDir, "fp.jsonl"))
	if len(same) != 1 || same["127.0.0.1"] {
		t.Errorf("hashed addresses across a restart: %v, want one hash", same)
	}
	for ip := range diff {
		if same[ip] {
			t.Errorf("another secret hashed 127.0.0.1 the same: %s", ip)
		}
	}
}

// TestSecretWithoutStateDir: without a state directory the secret is per
// process and the log says so; a secret_file that cannot be made, or one
// too short, stops the edge.
func TestSecretWithoutStateDir(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, yaml string
		err, warn  string
	}{
		{"no state", `tls: { mode: self-signed, cache: "" }`, "", `"msg":"secret_per_process"`},
		{"secret_file unmakeable", `tls: { mode: self-signed, cache: "" }
challenge: { secret_file: /proc/nonexistent/secret }`, "challenge.secret_file: secret file: mkdir /proc/nonexistent", ""},
		{"secret too short", `tls: { mode: self-signed, cache: "" }
challenge: { secret_file: SHORT }`, "holds 3 bytes, want at least", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			short := filepath.Join(t.TempDir(), "short")
			if err := os.WriteFile(short, []byte("abc"), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Parse("s.yaml", []byte(strings.ReplaceAll(tt.yaml, "SHORT", short)+
				"\nlisten: {https: '127.0.0.1:0', http: '', admin: ''}\nsites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1'}]\n"))
			if err != nil {
				t.Fatal(err)
			}
			var logBuf syncBuffer
			s, err := New(cfg, slog.New(slog.NewJSONHandler(&logBuf, nil)))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("New: %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Shutdown(context.Background())
			if !strings.Contains(logBuf.String(), tt.warn) {
				t.Errorf("log lacks %s:\n%s", tt.warn, logBuf.String())
			}
		})
	}
}
