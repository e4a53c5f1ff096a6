package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maatproxy/maat/internal/testenv"
)

// TestBashCompletion: the script parses (bash -n), and completing real
// command lines in bash offers the commands, subcommands, flags and -by
// fields of this binary.
func TestBashCompletion(t *testing.T) {
	t.Parallel()
	bash := testenv.NeedCommand(t, "bash")
	script, errOut, code := edgeRun(t, "", "completion", "bash")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	file := writeFile(t, t.TempDir(), "edge.bash", script)
	if out, err := exec.Command(bash, "-n", file).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	for _, tt := range []struct {
		line string   // words typed, the last one being completed
		want []string // among the answers
		not  []string // not among them
	}{
		{"edge ", []string{"run", "config", "policy", "fp", "trust", "completion", "hash-password"}, []string{"check"}},
		{"edge con", []string{"config"}, []string{"run"}},
		{"edge config ", []string{"check"}, nil},
		{"edge policy ", []string{"check", "explain"}, nil},
		{"edge policy explain -", []string{"-config", "-policy", "-from-log", "-ua", "-no-dns", "-h"}, []string{"-by"}},
		{"edge fp top -", []string{"-by", "-since", "-n", "-json"}, nil},
		{"edge fp top -by ", []string{"path", "status", "action", "rule", "ja4"}, nil},
		{"edge fp top fp.jsonl -by a", []string{"action", "asn", "as_org"}, []string{"path"}},
		{"edge completion ", []string{"bash", "zsh"}, nil},
		{"edge trust -", []string{"-install", "-config", "-root"}, nil},
		{"edge help ", []string{"run", "policy"}, nil},
	} {
		t.Run(tt.line, func(t *testing.T) {
			t.Parallel()
			words := strings.Split(tt.line, " ")
			quoted := make([]string, len(words))
			for i, w := range words {
				quoted[i] = fmt.Sprintf("%q", w)
			}
			prog := fmt.Sprintf("source %q\nCOMP_WORDS=(%s)\nCOMP_CWORD=%d\n_edge\nprintf '%%s\\n' \"${COMPREPLY[@]}\"\n",
				file, strings.Join(quoted, " "), len(words)-1)
			cmd := exec.Command(bash, "--norc", "--noprofile", "-c", prog)
			cmd.Dir = t.TempDir()
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			got := strings.Fields(string(out))
			for _, w := range tt.want {
				if !contains(got, w) {
					t.Errorf("%q offers %v, without %q", tt.line, got, w)
				}
			}
			for _, w := range tt.not {
				if contains(got, w) {
					t.Errorf("%q offers %q: %v", tt.line, w, got)
				}
			}
		})
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// TestZshCompletion: the script parses (zsh -n) and loads into zsh's
// completion system, both sourced and from $fpath, defining _edge for edge.
func TestZshCompletion(t *testing.T) {
	t.Parallel()
	zsh := testenv.NeedCommand(t, "zsh")
	script, errOut, code := edgeRun(t, "", "completion", "zsh")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	dir := t.TempDir()
	file := writeFile(t, dir, "_edge", script)
	if out, err := exec.Command(zsh, "-n", file).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v\n%s", err, out)
	}
	home := t.TempDir()
	for name, prog := range map[string]string{
		"sourced": fmt.Sprintf("autoload -Uz compinit && compinit -u -d %q\nsource %q\nprint -r -- ${_comps[edge]}\n", filepath.Join(home, "dump1"), file),
		"fpath":   fmt.Sprintf("fpath=(%q $fpath)\nautoload -Uz compinit && compinit -u -d %q\nprint -r -- ${_comps[edge]}\n", dir, filepath.Join(home, "dump2")),
	} {
		cmd := exec.Command(zsh, "-f", "-c", prog)
		cmd.Env = append(os.Environ(), "HOME="+home)
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "_edge" {
			t.Errorf("%s: %v: %q, want _edge", name, err, out)
		}
	}
}

// TestFishCompletion: the script parses (fish -n), and fish's own
// completer (complete -C) offers the commands, subcommands, flags and -by
// fields of this binary for real command lines.
func TestFishCompletion(t *testing.T) {
	t.Parallel()
	fish := testenv.NeedCommand(t, "fish")
	script, errOut, code := edgeRun(t, "", "completion", "fish")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	file := writeFile(t, t.TempDir(), "edge.fish", script)
	if out, err := exec.Command(fish, "--no-config", "-n", file).CombinedOutput(); err != nil {
		t.Fatalf("fish -n: %v\n%s", err, out)
	}
	for _, tt := range []struct {
		line string
		want []string
		not  []string
	}{
		{"edge ", []string{"run", "config", "policy", "fp", "trust", "completion", "hash-password", "help"}, []string{"check", "-config"}},
		{"edge policy ", []string{"check", "explain"}, []string{"run"}},
		{"edge policy explain -", []string{"-config", "-policy", "-from-log", "-ua", "-no-dns"}, []string{"-by"}},
		{"edge fp top -", []string{"-by", "-since", "-n", "-json"}, []string{"-ua"}},
		{"edge fp top -by ", []string{"path", "status", "action", "rule", "ja4"}, nil},
		{"edge completion ", []string{"bash", "zsh", "fish"}, nil},
		{"edge trust -", []string{"-install", "-config", "-root"}, nil},
		{"edge help ", []string{"run", "policy"}, nil},
	} {
		t.Run(tt.line, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(fish, "--no-config", "-c", "source $argv[1]; complete -C $argv[2]", file, tt.line)
			cmd.Dir = t.TempDir()
			cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				word, _, _ := strings.Cut(line, "\t")
				got = append(got, word)
			}
			for _, w := range tt.want {
				if !contains(got, w) {
					t.Errorf("%q offers %v, without %q", tt.line, got, w)
				}
			}
			for _, w := range tt.not {
				if contains(got, w) {
					t.Errorf("%q offers %q: %v", tt.line, w, got)
				}
			}
		})
	}
}
