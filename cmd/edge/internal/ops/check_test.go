package ops

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/maatproxy/maat/edge"
	"github.com/maatproxy/maat/edge/config"
)

// tree lists the files under dir.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCheckConfigFindsWhatRunRefuses: for each mistake, CheckConfig names
// the file, line and key, and the edge itself (LoadConfig, New and Start,
// as `edge run` calls them) refuses the same file: the check reports what run
// would meet, before it meets it. The check writes nothing.
func TestCheckConfigFindsWhatRunRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badPolicy := write("bad-policy.yaml", "bots:\n  - name: x\n    action: ALLOW\n")
	notMMDB := write("asn.mmdb", "not a database\n")
	badTemplates := write("templates/page.html", `{{define "page"}}{{.Nope`)
	aFile := write("a-file", "x")
	shortSecret := write("short-secret", "abc")
	base := "listen: { https: \"127.0.0.1:0\", http: \"\", admin: \"\" }\nlog: { fingerprints: off }\n"
	site := "sites:\n  - hosts: [a.test]\n    upstream: http://127.0.0.1:1\n"
	for _, tt := range []struct {
		name, yaml string
		want       string
	}{
		{"missing policy", base + "tls: {mode: self-signed, cache: ''}\npolicy: " + dir + "/nope.yaml\n" + site,
			":4: policy: open " + dir + "/nope.yaml: no such file or directory"},
		{"invalid policy", base + "tls: {mode: self-signed, cache: ''}\npolicy: " + badPolicy + "\n" + site,
			":4: policy: invalid policy: " + badPolicy + ":2: rule \"x\": no matcher"},
		{"invalid site policy", base + "tls: {mode: self-signed, cache: ''}\n" + site + "  - hosts: [b.test]\n    upstream: http://127.0.0.1:1\n    policy: " + badPolicy + "\n",
			":9: sites[1].policy: policy: invalid policy: " + badPolicy + ":2: rule \"x\": no matcher"},
		{"missing certificate files", base + "tls:\n  mode: files\n  cert_file: " + dir + "/c.pem\n  key_file: " + dir + "/k.pem\n" + site,
			":3: tls: certs: loading " + dir + "/c.pem"},
		{"access log directory missing", base + "tls: {mode: self-signed, cache: ''}\n" + site + "    access_log: {path: " + dir + "/nodir/access.log}\n",
			":7: sites[0].access_log.path: directory " + dir + "/nodir does not exist"},
		{"fingerprint log directory unmakeable", "listen: { https: \"127.0.0.1:0\", http: \"\", admin: \"\" }\ntls: {mode: self-signed, cache: ''}\nlog: {fingerprints: " + aFile + "/sub/fp.jsonl}\n" + site,
			":3: log.fingerprints: directory " + aFile + "/sub cannot be made: " + aFile + " is not a directory"},
		{"port out of range", "listen: { https: \":99443\" }\nlog: { fingerprints: off }\ntls: {mode: self-signed, cache: ''}\n" + site,
			":1: listen.https: port \"99443\" is not a number from 0 to 65535"},
		{"address that does not resolve", "listen: { https: \"127.0.0.1:0\", http: \"\", admin: \"nohost.invalid:9100\" }\nlog: { fingerprints: off }\ntls: {mode: self-signed, cache: ''}\n" + site,
			":1: listen.admin: lookup nohost.invalid"},
		{"static root missing", base + "tls: {mode: self-signed, cache: ''}\nsites:\n  - hosts: [a.test]\n    root: " + dir + "/www\n",
			":6: sites[0].root: static: root is not a usable directory"},
		{"geo file not a database", base + "tls: {mode: self-signed, cache: ''}\ngeo: {asn_db: " + notMMDB + "}\n" + site,
			":4: geo: "},
		{"templates that do not parse", base + "tls: {mode: self-signed, cache: ''}\nchallenge: {template_dir: " + filepath.Dir(badTemplates) + "}\n" + site,
			":4: challenge.template_dir: "},
		{"secret too short", base + "tls: {mode: self-signed, cache: ''}\nchallenge: {secret_file: " + shortSecret + "}\n" + site,
			":4: challenge.secret_file: secret file " + shortSecret + " holds 3 bytes"},
		{"state directory unmakeable", base + "tls: {mode: self-signed, cache: " + aFile + "/state}\n" + site,
			":3: tls.cache: directory " + aFile + "/state cannot be made"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfgPath := filepath.Join(t.TempDir(), "edge.yaml")
			if err := os.WriteFile(cfgPath, []byte(tt.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			before := tree(t, dir)
			_, err := CheckConfig(t.Context(), cfgPath, CheckOptions{})
			if err == nil || !strings.Contains(err.Error(), cfgPath+tt.want) {
				t.Errorf("CheckConfig: %v\nwant %s%s", err, cfgPath, tt.want)
			}
			if after := tree(t, dir); !slices.Equal(before, after) {
				t.Errorf("the check wrote: before %v, after %v", before, after)
			}
			cfg, err := config.Load(cfgPath)
			if err == nil {
				var s *edge.Server
				if s, err = edge.New(cfg, nil); err == nil {
					err = s.Start()
					s.Shutdown(t.Context())
				}
			}
			if err == nil {
				t.Errorf("run accepts what the check refused")
			}
		})
	}
}

// TestCheckConfigGood: a good file passes and nothing is made; its
// warnings say what run would warn of.
func TestCheckConfigGood(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "edge.yaml")
	www := filepath.Join(dir, "www")
	if err := os.Mkdir(www, 0o755); err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf(`listen: { https: "127.0.0.1:0", http: "127.0.0.1:0", admin: "localhost:0" }
tls: { mode: self-signed, cache: %q }
log: { fingerprints: %q }
sites:
  - hosts: [a.test]
    upstream: http://127.0.0.1:1
    access_log: { path: %q }
    routes: [{ path: /static/, root: %q }]
`, filepath.Join(dir, "state"), filepath.Join(dir, "logs", "fp.jsonl"), filepath.Join(dir, "access.log"), www)
	if err := os.WriteFile(cfgPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	before := tree(t, dir)
	rep, err := CheckConfig(t.Context(), cfgPath, CheckOptions{})
	warnings := rep.Warnings
	if err != nil || len(warnings) != 0 {
		t.Fatalf("CheckConfig: %v, warnings %q", err, warnings)
	}
	if after := tree(t, dir); !slices.Equal(before, after) {
		t.Errorf("the check wrote: before %v, after %v", before, after)
	}
	// Without a state directory, the per-process secret is a warning.
	if err := os.WriteFile(cfgPath, []byte(strings.Replace(text, filepath.Join(dir, "state"), "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err = CheckConfig(t.Context(), cfgPath, CheckOptions{})
	warnings = rep.Warnings
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "will not survive a restart") {
		t.Errorf("CheckConfig: %v, warnings %q", err, warnings)
	}
}
