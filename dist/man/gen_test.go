package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// topHelp is `edge help` as the command printed it when this was written.
const topHelp = `usage: edge <command> [flags]

commands:
  demo                      HTTPS, HTTP/2 and HTTP/3 on https://localhost:8443 with a demo upstream
  run -config FILE          serve a configuration (SIGHUP reloads, SIGTERM drains)
  config check FILE         validate a configuration
  policy explain -config FILE [-ua S] [-path P] [-ip A] [-ja4 F] [-header K:V]...
  fp top [-by KEY] FILE...  summarize fingerprint logs
  completion bash|zsh       print a shell completion script
  hash-password             bcrypt a password read from the terminal or stdin
  version
`

func TestParseHelp(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		help      string
		wantNames []string
		wantSum   map[string]string
		wantNotes []string
		wantIntro []string
		wantErr   bool
	}{
		{
			name:      "today's help",
			help:      topHelp,
			wantNames: []string{"demo", "run", "config check", "policy explain", "fp top", "completion", "hash-password", "version"},
			wantSum: map[string]string{
				"run": "serve a configuration (SIGHUP reloads, SIGTERM drains)", "policy explain": "",
				"completion": "print a shell completion script",
			},
		},
		{
			name:      "wrapped summary and notes",
			help:      "Usage: edge COMMAND\n\nCommands:\n  run FILE    serve a configuration,\n              reloading on SIGHUP\n  trust       print the local CA\n\nRun 'edge help COMMAND' for more.\n",
			wantNames: []string{"run", "trust"},
			wantSum:   map[string]string{"run": "serve a configuration, reloading on SIGHUP"},
			wantNotes: []string{"Run 'edge help COMMAND' for more."},
		},
		{
			name: "intro, entries with flags and arguments, notes",
			help: "usage: edge <command> [flags] [arguments]\n\nMaat's edge proxy.\n\ncommands:\n" +
				"  run [flags] FILE               serve a configuration\n" +
				"  fp top [flags] FILE…           summarize fingerprint logs\n" +
				"  trust [flags] [FILE]           print or install the local CA\n\n" +
				"edge help COMMAND describes a command.\nExit status: 0 ok, 1 failure, 2 usage error.\n",
			wantNames: []string{"run", "fp top", "trust"},
			wantSum:   map[string]string{"fp top": "summarize fingerprint logs"},
			wantIntro: []string{"Maat's edge proxy."},
			wantNotes: []string{"edge help COMMAND describes a command.", "Exit status: 0 ok, 1 failure, 2 usage error."},
		},
		{name: "no command list", help: "usage: edge <command>\n", wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u, err := parseHelp(tt.help)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseHelp: err = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			var names []string
			for _, c := range u.commands {
				names = append(names, c.name)
				if want, ok := tt.wantSum[c.name]; ok && c.summary != want {
					t.Errorf("%s: summary %q, want %q", c.name, c.summary, want)
				}
			}
			if !slices.Equal(names, tt.wantNames) {
				t.Errorf("names = %q, want %q", names, tt.wantNames)
			}
			if !slices.Equal(u.intro, tt.wantIntro) {
				t.Errorf("intro = %q, want %q", u.intro, tt.wantIntro)
			}
			if !slices.Equal(u.notes, tt.wantNotes) {
				t.Errorf("notes = %q, want %q", u.notes, tt.wantNotes)
			}
		})
	}
}

func TestEscape(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"-config FILE", `\-config FILE`},
		{`C:\path`, `C:\epath`},
		{".maat/ paths", `\&.maat/ paths`},
		{"'quoted' start", `\&'quoted' start`},
		{"plain", "plain"},
	} {
		if got := escape(tt.in); got != tt.want {
			t.Errorf("escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := quote(`say "hi"`); got != `"say ""hi"""` {
		t.Errorf("quote = %s", got)
	}
}

// fakeEdge answers as a binary with per-command help for run only; help
// for other commands repeats the top help, as a binary without per-command
// help does.
func fakeEdge(calls *[]string) runner {
	return func(args ...string) (string, error) {
		*calls = append(*calls, strings.Join(args, " "))
		switch strings.Join(args, " ") {
		case "help":
			return topHelp, nil
		case "version":
			return "edge v1.2.3 (commit abc, go1.26)\n", nil
		case "help run":
			return "usage: edge run [-config] FILE\n  -config string\n    \tconfiguration file (YAML)\n", nil
		case "help version":
			return "", errors.New("exit status 2")
		}
		return topHelp, nil
	}
}

func TestGenerate(t *testing.T) {
	t.Parallel()
	var calls []string
	page, err := generate(fakeEdge(&calls))
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	for _, want := range []string{
		`.TH EDGE 1 "" "edge v1.2.3 (commit abc, go1.26)" "User Commands"`,
		`.B "config check FILE"`,
		`.B "completion bash|zsh"`,
		`.SS "edge run"`,
		`\-config string`,
		".SH FILES", ".SH SIGNALS",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Count(s, ".SS ") != 1 {
		t.Errorf("page has %d per-command sections, want 1 (run): help that repeats the top help is left out\n%s", strings.Count(s, ".SS "), s)
	}
	for _, c := range calls {
		if !strings.HasPrefix(c, "help") && c != "version" {
			t.Errorf("generate ran %q: only `help …` and `version` may be run", c)
		}
	}
}

// TestPageRenders formats the page with man(1), as a reader will.
func TestPageRenders(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("man"); err != nil {
		t.Skip("man is not installed; the package test renders the installed page")
	}
	var calls []string
	page, err := generate(fakeEdge(&calls))
	if err != nil {
		t.Fatal(err)
	}
	gz, err := gzipped(page)
	if err != nil {
		t.Fatal(err)
	}
	gz2, _ := gzipped(page)
	if !bytes.Equal(gz, gz2) {
		t.Error("gzipped is not deterministic")
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	if back, _ := io.ReadAll(zr); !bytes.Equal(back, page) {
		t.Error("gzip round trip changed the page")
	}
	cmd := exec.Command("man", "-l", "-")
	cmd.Stdin = bytes.NewReader(page)
	cmd.Env = append(cmd.Environ(), "MANWIDTH=100")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("man -l: %v\n%s", err, stderr.String())
	}
	text := string(out)
	for _, want := range []string{"config check FILE", "run -config FILE", "-config string", "SIGHUP", "hash-password"} {
		if !strings.Contains(text, want) {
			t.Errorf("rendered page lacks %q:\n%s", want, text)
		}
	}
}
