package policy

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestAnubisDataLoads: every file of Anubis's policy tree that Maat ships
// loads as a policy file imports it, and its default policy,
// botPolicies.yaml, loads unchanged as a policy file.
func TestAnubisDataLoads(t *testing.T) {
	t.Parallel()
	names := AnubisData()
	if len(names) < 60 {
		t.Fatalf("%d files in (data)/", len(names))
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if name == "(data)/botPolicies.yaml" {
				data, err := readAnubisData("botPolicies.yaml")
				if err != nil {
					t.Fatal(err)
				}
				p, err := Parse(name, data, Options{})
				if err != nil {
					t.Fatal(err)
				}
				if len(p.Rules()) < 20 {
					t.Errorf("%d rules", len(p.Rules()))
				}
				return
			}
			src := "bots:\n  - import: " + name + "\n"
			if _, err := Parse("policy.yaml", []byte(src), Options{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAnubisDataImportNames: an import of a name Anubis's tree does not
// have is refused, naming the tree's version and directories; a glob
// imports the files it matches in Anubis's (natural) order.
func TestAnubisDataImportNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, imp string
		rules     []string
		err       string
	}{
		{"file", "(data)/crawlers/ai-training.yaml", []string{"ai-crawlers-training"}, ""},
		{"nested imports", "(data)/meta/messengers-preview.yaml", []string{"telegrambot", "vkbot"}, ""},
		{"glob", "(data)/bots/irc-bots/*.yaml", []string{"archlinux-phrik", "gentoo-chat"}, ""},
		{"missing", "(data)/bots/ahrefs.yaml", nil, "(data)/bots/ahrefs.yaml is not a file of Anubis " + AnubisVersion() + "'s policy tree (its directories: (data)/apps/"},
		{"outside", "(data)/../default.yaml", nil, "is not a file of Anubis"},
		{"directory", "(data)/bots", nil, "is not a file of Anubis"},
		{"glob matches nothing", "(data)/bots/*.json", nil, "(data)/bots/*.json matches none of the files of Anubis"},
		{"Maat's names", "(data)/ai-crawlers.yaml", nil, "is not a file of Anubis"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := Parse("p.yaml", []byte("bots:\n  - import: "+tt.imp+"\n"), Options{})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "p.yaml:2: ") {
					t.Fatalf("error %v, want p.yaml:2 and %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range p.Rules() {
				got = append(got, r.Name)
			}
			if !slices.Equal(got, tt.rules) {
				t.Errorf("rules %q, want %q", got, tt.rules)
			}
		})
	}
}

// TestAnubisDataSource: SOURCE records the version and commit the copy
// came from, and the copy is that version's data/ byte for byte when the
// module is in the module cache (make anubis-data puts it there).
func TestAnubisDataSource(t *testing.T) {
	t.Parallel()
	if v := AnubisVersion(); v != "v1.27.0" {
		t.Errorf("AnubisVersion() = %q", v)
	}
	src, err := os.ReadFile("anubisdata/SOURCE")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"module: github.com/TecharoHQ/anubis\n", "commit: d39e26cedcc96bea5e4915297c756e7eec74aaf7\n", "license: MIT"} {
		if !strings.Contains(string(src), want) {
			t.Errorf("SOURCE lacks %q", want)
		}
	}
	lic, err := os.ReadFile("anubisdata/LICENSE")
	if err != nil || !bytes.Contains(lic, []byte("Copyright (c) 2025 Xe Iaso")) || !bytes.Contains(lic, []byte("Permission is hereby granted")) {
		t.Errorf("anubisdata/LICENSE is not Anubis's MIT license: %v", err)
	}
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Skipf("go env: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "github.com", "!techaro!h!q", "anubis@"+AnubisVersion(), "data")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("%s is not in the module cache (make anubis-data fetches it)", dir)
	}
	var upstream []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch path.Ext(p) {
		case ".yaml", ".yml", ".json":
			rel, _ := filepath.Rel(dir, p)
			upstream = append(upstream, anubisDataPrefix+filepath.ToSlash(rel))
			want, _ := os.ReadFile(p)
			got, err := readAnubisData(filepath.ToSlash(rel))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s differs from %s (run make anubis-data)", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(upstream)
	if got := AnubisData(); !slices.Equal(got, upstream) {
		t.Errorf("files %q, upstream %q", got, upstream)
	}
}

// TestNaturalOrder: glob imports come in Anubis's order
// (fvbommel/sortorder.Natural).
func TestNaturalOrder(t *testing.T) {
	t.Parallel()
	got := []string{"rule10.yaml", "rule2.yaml", "rule02.yaml", "a.yaml", "rule1.yaml", "_x.yaml", "0.yaml", "rule.yaml"}
	sortNatural(got)
	want := []string{"0.yaml", "_x.yaml", "a.yaml", "rule1.yaml", "rule2.yaml", "rule02.yaml", "rule10.yaml", "rule.yaml"} // digits before other bytes
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
