package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// TestConfigValuesFromElsewhere: ${file:…} and ${env:…} values are read
// where the operator wrote them — a Redis URL with its password, a
// basic-auth hash, an email — with one trailing newline dropped, as
// systemd credentials and `echo x > file` leave it.
func TestConfigValuesFromElsewhere(t *testing.T) {
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	redis := write("redis_url", "redis://:pa$$word@127.0.0.1:6379/0\n")
	alice := write("alice", string(hash)+"\r\n")
	t.Setenv("MAAT_TEST_EMAIL", "ops@example.org")
	cfg, err := Parse("e.yaml", []byte(`tls: {mode: self-signed, cache: "", acme: {email: "${env:MAAT_TEST_EMAIL}"}}
store: {kind: redis, url: "${file:`+redis+`}"}
sites:
  - hosts: [a.test]
    upstream: http://127.0.0.1:1
    routes:
      - path: /admin/
        upstream: http://127.0.0.1:2
        basic_auth: {users: {alice: "${file:`+alice+`}"}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Store.URL != "redis://:pa$$word@127.0.0.1:6379/0" {
		t.Errorf("store.url = %q", cfg.Store.URL)
	}
	if cfg.TLS.ACME.Email != "ops@example.org" {
		t.Errorf("tls.acme.email = %q", cfg.TLS.ACME.Email)
	}
	if got := cfg.Sites[0].Routes[0].BasicAuth.Users["alice"]; got != string(hash) {
		t.Errorf("basic_auth alice = %q, want the hash without its line end", got)
	}
}

// TestConfigValuesErrors: a value that cannot be read is an error at its
// file, line and key, every one at once, without the value; keys and
// values that merely contain ${…} are taken as written.
func TestConfigValuesErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, maxValueFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Parse("e.yaml", []byte(`tls: {mode: self-signed, cache: ""}
store: {kind: redis, url: "${file:`+filepath.Join(dir, "missing")+`}"}
log: {level: "${env:MAAT_TEST_SURELY_UNSET}"}
challenge: {secret_file: "${file:`+big+`}"}
sites: [{hosts: [a.test], upstream: http://127.0.0.1:1}]
`))
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{"e.yaml:2: store.url: ", "e.yaml:3: log.level: ", "MAAT_TEST_SURELY_UNSET", "e.yaml:4: challenge.secret_file: ", "larger than"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if !errors.Is(err, errValueFile) || !errors.Is(err, errValueEnv) {
		t.Errorf("error does not wrap the sentinels: %v", err)
	}

	cfg, err := Parse("e.yaml", []byte(`tls: {mode: self-signed, cache: "", acme: {email: "x${env:HOME}"}}
divert: {"${env:HOME}": {upstream: http://127.0.0.1:3}}
sites: [{hosts: [a.test], upstream: http://127.0.0.1:1, headers: {request: {set: {X-A: "${nope:x}"}}}}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLS.ACME.Email != "x${env:HOME}" {
		t.Errorf("a value that only contains a reference was expanded: %q", cfg.TLS.ACME.Email)
	}
	if _, ok := cfg.Divert["${env:HOME}"]; !ok {
		t.Errorf("a key was expanded: %v", cfg.Divert)
	}
	if v := cfg.Sites[0].Headers.Request.Set["X-A"]; v != "${nope:x}" {
		t.Errorf("an unknown kind was expanded: %q", v)
	}
}
