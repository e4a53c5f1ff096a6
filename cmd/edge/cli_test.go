package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/maatproxy/maat/internal/testenv"
)

// edgeRun runs the binary (this test binary, as main) with args and stdin,
// and returns its standard output, standard error and exit status.
func edgeRun(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "EDGE_TEST_MAIN=1")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("edge %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHelpEverywhere: every command answers -h, --help and edge help CMD
// with its own usage on standard output and exit status 0.
func TestHelpEverywhere(t *testing.T) {
	t.Parallel()
	type tc struct {
		name string
		args []string
		want string
	}
	cases := []tc{
		{"edge -h", []string{"-h"}, "usage: edge <command>"},
		{"edge --help", []string{"--help"}, "usage: edge <command>"},
		{"edge help", []string{"help"}, "usage: edge <command>"},
		{"edge help -h", []string{"help", "-h"}, "usage: edge <command>"},
		{"edge config -h", []string{"config", "-h"}, "usage: edge config <subcommand>"},
		{"edge help policy", []string{"help", "policy"}, "usage: edge policy <subcommand>"},
	}
	for _, c := range commands() {
		words := strings.Fields(c.name)
		want := "usage: edge " + c.name + " "
		cases = append(cases,
			tc{"edge " + c.name + " -h", append(append([]string{}, words...), "-h"), want},
			tc{"edge " + c.name + " --help", append(append([]string{}, words...), "--help"), want},
			tc{"edge help " + c.name, append([]string{"help"}, words...), want},
			// -h after an argument, as a user adds it at the end of a line
			tc{"edge " + c.name + " ARG -h", append(append([]string{}, words...), "x.yaml", "-h"), want})
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := edgeRun(t, "", tt.args...)
			if code != 0 || !strings.HasPrefix(out, tt.want) || errOut != "" {
				t.Errorf("exit %d, stdout %.80q, stderr %q; want 0, %q…, nothing", code, out, errOut, tt.want)
			}
		})
	}
}

// TestVersion: edge --version and edge version print the version and the
// Go version the binary was built with.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--version"}, {"version"}, {"-version"}} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			out, _, code := edgeRun(t, "", args...)
			if code != 0 || !strings.HasPrefix(out, "edge ") || !strings.Contains(out, runtime.Version()) {
				t.Errorf("exit %d, %q; want edge … %s", code, out, runtime.Version())
			}
		})
	}
}

// stutter returns a prefix said twice in a row ("edge: edge:",
// "policy: policy:"), or "".
func stutter(line string) string {
	parts := strings.Split(line, ": ")
	for i := 1; i < len(parts); i++ {
		if w := parts[i]; w == parts[i-1] && !strings.Contains(w, " ") {
			return w + ": " + w + ":"
		}
	}
	return ""
}

// TestErrorsExitAndPrefix feeds every command real mistakes: usage
// mistakes exit 2, failures 1, and every line of standard error starts
// with "edge: " exactly once (or is the indented rest of a problem),
// without a package name said twice.
func TestErrorsExitAndPrefix(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	badPolicy := writeFile(t, dir, "badpol.yaml", "bots:\n  - name: x\n    action: FOO\n")
	typoPolicy := writeFile(t, dir, "typo.yaml", "bots:\n  - name: x\n    colour: red\n    path_regex: ^/a\n    action: DENY\n")
	badCfg := writeFile(t, dir, "bad.yaml", "policy: "+badPolicy+"\ntls: {mode: self-signed, cache: \"\"}\nsites: [{hosts: [a.test], upstream: \"http://127.0.0.1:1\"}]\n")
	badGeo := writeFile(t, dir, "geo.yaml", "geo: {asn_db: "+badPolicy+"}\ntls: {mode: self-signed, cache: \"\"}\nsites: [{hosts: [a.test], upstream: \"http://127.0.0.1:1\"}]\n")
	selfSigned := writeFile(t, dir, "acme.yaml", "tls: {mode: acme, cache: "+dir+"/state}\nsites: [{hosts: [a.example], upstream: \"http://127.0.0.1:1\"}]\n")
	missing := filepath.Join(dir, "missing.yaml")
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string // in standard error
	}{
		{"no command", nil, 2, "edge: no command given"},
		{"unknown command", []string{"frobnicate"}, 2, `edge: unknown command "frobnicate"`},
		{"unknown flag", []string{"run", "-bogus"}, 2, "edge: run: flag provided but not defined: -bogus"},
		{"demo upstream without scheme", []string{"demo", "-upstream", "localhost:3000"}, 1, `edge: -upstream: upstream "localhost:3000" has no scheme`},
		{"demo bad port", []string{"demo", "-addr", "127.0.0.1:99999", "-upstream", "http://127.0.0.1:1"}, 1, `listen.https: port "99999"`},
		{"demo argument", []string{"demo", "extra"}, 2, `edge: demo: unexpected argument "extra"`},
		{"missing subcommand", []string{"policy"}, 2, "edge: policy: a subcommand is needed"},
		{"unknown subcommand", []string{"fp", "bottom"}, 2, `edge: fp: unknown subcommand "bottom"`},
		{"run without file", []string{"run"}, 2, "edge: run: missing the configuration FILE"},
		{"run file and -config", []string{"run", badCfg, "-config", badCfg}, 2, "not both"},
		{"run missing file", []string{"run", missing}, 1, "edge: read config: open " + missing},
		{"run bad policy", []string{"run", badCfg}, 1, "edge: " + badCfg + ":1: policy: invalid policy: " + badPolicy + ":2:"},
		{"run bad geo", []string{"run", badGeo}, 1, "edge: " + badGeo + ":1: geo"},
		{"config check bad policy", []string{"config", "check", badCfg}, 1, "edge: " + badCfg + ":1: policy: invalid policy:"},
		{"config check missing", []string{"config", "check", missing}, 1, "edge: read config:"},
		{"policy check bad", []string{"policy", "check", badPolicy}, 1, "edge: policy: invalid policy: " + badPolicy + ":2:"},
		{"policy check unknown key", []string{"policy", "check", typoPolicy}, 0, "edge: warning: " + typoPolicy + `:3: rule "x": unknown key "colour" ignored`},
		{"policy check -strict unknown key", []string{"policy", "check", "-strict", typoPolicy}, 1, "edge: policy: invalid policy: " + typoPolicy + `:3: rule "x": unknown key "colour"`},
		{"policy check missing", []string{"policy", "check", missing}, 1, "edge: policy: open " + missing},
		{"policy check no file", []string{"policy", "check"}, 2, "edge: policy check: missing FILE"},
		{"policy explain bad policy", []string{"policy", "explain", "-policy", badPolicy}, 1, "edge: policy: invalid policy:"},
		{"policy explain bad config", []string{"policy", "explain", "-config", badCfg}, 1, "edge: " + badCfg + ":1: policy: invalid policy:"},
		{"policy explain both", []string{"policy", "explain", "-config", badCfg, "-policy", badPolicy}, 2, "not both"},
		{"policy explain bad ip", []string{"policy", "explain", "-ip", "300.1.1.1"}, 1, "edge: -ip:"},
		{"policy explain bad log line", []string{"policy", "explain", "-from-log", "{nope"}, 1, "edge: -from-log: fplog:"},
		{"robots2policy missing", []string{"robots2policy", missing}, 1, "edge: open " + missing},
		{"robots2policy two files", []string{"robots2policy", "a", "b"}, 2, `edge: robots2policy: unexpected argument "b"`},
		{"fp top missing", []string{"fp", "top", missing}, 1, "edge: fplog: open " + missing},
		{"fp top no file", []string{"fp", "top"}, 2, "edge: fp top: missing FILE"},
		{"fp top bad by", []string{"fp", "top", "-by", "colour", missing}, 2, `edge: fp top: -by "colour"`},
		{"fp top bad since", []string{"fp", "top", "-since", "yesterday", missing}, 2, "edge: fp top: -since: fplog:"},
		{"fp top bad action", []string{"fp", "top", "-action", "BLOCK", missing}, 2, `edge: fp top: -action "BLOCK": want one of ALLOW, CHALLENGE, DENY, RATE, DIVERT, PASS`},
		{"fp top bad site", []string{"fp", "top", "-site", "https://a.test/", missing}, 2, `edge: fp top: -site "https://a.test/": want a host name`},
		{"explain both", []string{"explain", "-id", "x", "-config", badCfg, "-policy", badPolicy}, 2, "not both"},
		{"hash-password empty", []string{"hash-password"}, 1, "edge: no password on standard input"},
		{"trust missing", []string{"trust", missing}, 1, "edge: read config:"},
		{"trust not self-signed", []string{"trust", selfSigned}, 1, "edge: " + selfSigned + ":1: tls.mode: is \"acme\""},
		{"completion tcsh", []string{"completion", "tcsh"}, 2, `edge: completion: unknown shell "tcsh"`},
		{"version with argument", []string{"version", "x"}, 2, `edge: version: unexpected argument "x"`},
		{"help unknown", []string{"help", "frobnicate"}, 2, `edge: unknown command "frobnicate"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, errOut, code := edgeRun(t, "", tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, errOut)
			}
			if !strings.Contains(errOut, tt.want) {
				t.Errorf("stderr lacks %q:\n%s", tt.want, errOut)
			}
			checkPrefixes(t, errOut)
		})
	}
}

// checkPrefixes: each line starts with "edge: " once, or continues the
// problem above it (indented, or the overview printed for no command).
func checkPrefixes(t *testing.T, errOut string) {
	t.Helper()
	sawProblem := false
	for _, line := range strings.Split(strings.TrimRight(errOut, "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "edge: "):
			sawProblem = true
			if strings.HasPrefix(line, "edge: edge:") {
				t.Errorf("stutter: %q", line)
			}
			if m := stutter(line); m != "" {
				t.Errorf("%q says %q", line, m)
			}
		case strings.HasPrefix(line, "  ") && sawProblem:
		case !sawProblem: // the overview before "no command given"
		default:
			t.Errorf("line without edge: prefix: %q", line)
		}
	}
	if !sawProblem {
		t.Errorf("no edge: line in %q", errOut)
	}
}

// TestVersionFromVCS: a build in a clone with VCS stamping on says the
// commit it was built from, and a version that is not (devel).
func TestVersionFromVCS(t *testing.T) {
	t.Parallel()
	goCmd := testenv.NeedCommand(t, "go")
	git := testenv.NeedCommand(t, "git")
	top, err := exec.Command(git, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	head, err := exec.Command(git, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(strings.TrimSpace(string(top)), "cmd", "edge")
	if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err != nil || !fi.IsDir() {
		// A git worktree (.git is a file): the go command stamps only
		// builds inside a repository's own directory, so build a clone
		// of HEAD.
		clone := filepath.Join(t.TempDir(), "src")
		if out, err := exec.Command(git, "clone", "--quiet", "--shared", strings.TrimSpace(string(top)), clone).CombinedOutput(); err != nil {
			t.Fatalf("git clone: %v\n%s", err, out)
		}
		if out, err := exec.Command(git, "-C", clone, "checkout", "--quiet", strings.TrimSpace(string(head))).CombinedOutput(); err != nil {
			t.Fatalf("git checkout: %v\n%s", err, out)
		}
		src = filepath.Join(clone, "cmd", "edge")
	}
	exe := filepath.Join(t.TempDir(), "edge")
	build := exec.Command(goCmd, "build", "-buildvcs=true", "-o", exe, ".")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(exe, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	v := string(out)
	if !strings.HasPrefix(v, "edge v") || !strings.Contains(v, "(commit "+string(head[:12])) || !strings.Contains(v, runtime.Version()) {
		t.Errorf("%q; want edge v… (commit %s…) %s", v, head[:12], runtime.Version())
	}
}

// TestFlagsAnywhere: flags stand before, between or after the arguments;
// "--" ends them; "-" is an argument.
func TestFlagsAnywhere(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		pos  string
		n    int
		json bool
	}{
		{[]string{"a", "b"}, "a b", 20, false},
		{[]string{"-n", "5", "a"}, "a", 5, false},
		{[]string{"a", "-n", "5"}, "a", 5, false},
		{[]string{"a", "-json", "b", "-n=3"}, "a b", 3, true},
		{[]string{"-", "-n", "1"}, "-", 1, false},
		{[]string{"a", "--", "-n", "1"}, "a -n 1", 20, false},
	} {
		c := fpTopCommand()
		fs := c.newFlagSet()
		c.flags(fs)
		pos, err := parseInterspersed(fs, tt.args)
		n := fs.Lookup("n").Value.(flag.Getter).Get().(int)
		j := fs.Lookup("json").Value.(flag.Getter).Get().(bool)
		if err != nil || strings.Join(pos, " ") != tt.pos || n != tt.n || j != tt.json {
			t.Errorf("%q: args %q -n %d -json %v (%v); want %q %d %v", tt.args, pos, n, j, err, tt.pos, tt.n, tt.json)
		}
	}
}
