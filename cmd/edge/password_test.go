package main

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/maatproxy/maat/internal/testenv"
)

// TestHashPasswordPiped: a password on standard input becomes a bcrypt
// hash that verifies, alone or as a basic_auth.users line that the
// configuration accepts.
func TestHashPasswordPiped(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, stdin string
		args        []string
		prefix      string
	}{
		{"hash", "correct horse\n", nil, ""},
		{"no newline", "correct horse", nil, ""},
		{"CRLF", "correct horse\r\n", nil, ""},
		{"user line", "correct horse\n", []string{"alice"}, "alice: '"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := edgeRun(t, tt.stdin, append([]string{"hash-password"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			hash := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(out), tt.prefix), "'")
			if !strings.HasPrefix(out, tt.prefix) || bcrypt.CompareHashAndPassword([]byte(hash), []byte("correct horse")) != nil {
				t.Errorf("output %q is not %s+bcrypt(\"correct horse\")", out, tt.prefix)
			}
		})
	}
	// The line pastes into a configuration that then checks.
	out, _, _ := edgeRun(t, "s3cret\n", "hash-password", "alice")
	dir := t.TempDir()
	cfg := writeFile(t, dir, "edge.yaml", `tls: { mode: self-signed, cache: "" }
log: { fingerprints: off }
sites:
  - hosts: [a.test]
    upstream: http://127.0.0.1:1
    routes:
      - path: /admin/
        upstream: http://127.0.0.1:1
        basic_auth:
          users:
            `+out)
	if out, errOut, code := edgeRun(t, "", "config", "check", cfg); code != 0 {
		t.Errorf("config with the pasted line: exit %d %s %s", code, out, errOut)
	}
}

// TestHashPasswordTerminal: on a terminal (script(1) gives it one) the
// password is asked twice and not echoed; different answers are refused.
func TestHashPasswordTerminal(t *testing.T) {
	t.Parallel()
	script := testenv.NeedCommand(t, "script")
	testenv.NeedCommand(t, "stty")
	for _, tt := range []struct {
		name          string
		first, second string
		ok            bool
	}{
		{"twice the same", "tty-secret-1", "tty-secret-1", true},
		{"different", "tty-secret-1", "tty-secret-2", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(script, "-qec", os.Args[0]+" hash-password", "/dev/null")
			cmd.Env = append(os.Environ(), "EDGE_TEST_MAIN=1")
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			term := &promptWatcher{seen: make(chan struct{}, 16)}
			cmd.Stdout, cmd.Stderr = term, term
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Type each answer once its prompt is shown, as a person does
			// (typed earlier, the terminal would echo it before stty -echo).
			term.waitFor(t, "Password: ")
			io.WriteString(stdin, tt.first+"\n")
			term.waitFor(t, "Again: ")
			io.WriteString(stdin, tt.second+"\n")
			err = cmd.Wait()
			text := term.String()
			if strings.Contains(text, "tty-secret") {
				t.Errorf("the password was echoed:\n%s", text)
			}
			if !tt.ok {
				if err == nil || !strings.Contains(text, "edge: the passwords differ") {
					t.Errorf("%v:\n%s", err, text)
				}
				return
			}
			var hash string
			for _, f := range strings.Fields(text) {
				if strings.HasPrefix(f, "$2") {
					hash = f
				}
			}
			if err != nil || bcrypt.CompareHashAndPassword([]byte(hash), []byte(tt.first)) != nil {
				t.Errorf("%v: no hash of the password in:\n%s", err, text)
			}
		})
	}
}

// promptWatcher is a terminal's output, watched for prompts.
type promptWatcher struct {
	mu   sync.Mutex
	b    strings.Builder
	seen chan struct{}
}

func (p *promptWatcher) Write(b []byte) (int, error) {
	p.mu.Lock()
	p.b.Write(b)
	p.mu.Unlock()
	select {
	case p.seen <- struct{}{}:
	default:
	}
	return len(b), nil
}

func (p *promptWatcher) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.b.String()
}

// waitFor waits until the output holds prompt.
func (p *promptWatcher) waitFor(t *testing.T, prompt string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for !strings.Contains(p.String(), prompt) {
		select {
		case <-p.seen:
		case <-deadline:
			t.Fatalf("no %q on the terminal:\n%s", prompt, p.String())
		}
	}
}
