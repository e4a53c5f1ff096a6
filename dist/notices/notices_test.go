package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// tree writes files (slash paths relative to root) and returns root.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, text := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func modPkg(importPath, dir, modPath, modDir string, main bool) pkg {
	p := pkg{ImportPath: importPath, Dir: dir}
	p.Module = &struct {
		Path    string
		Version string
		Dir     string
		Main    bool
		Replace *struct {
			Path    string
			Version string
			Dir     string
		}
	}{Path: modPath, Version: "v1.0.0", Dir: modDir, Main: main}
	return p
}

func TestCollect(t *testing.T) {
	t.Parallel()
	root := tree(t, map[string]string{
		"a/LICENSE":                     "BSD of a",
		"a/NOTICE":                      "notice of a",
		"a/zstd/internal/x/LICENSE.txt": "MIT of x",
		"a/zstd/internal/x/x.go":        "package x",
		"a/other/COPYING":               "not linked: never read",
		"b/b.go":                        "package b",
		"goroot/LICENSE":                "Go's BSD",
		"goroot/src/net/net.go":         "package net",
		"main/LICENSE":                  "ours",
	})
	at := func(p string) string { return filepath.Join(root, filepath.FromSlash(p)) }
	std := pkg{ImportPath: "net", Dir: at("goroot/src/net"), Standard: true, Goroot: at("goroot")}
	a := modPkg("example.com/a", at("a"), "example.com/a", at("a"), false)
	ax := modPkg("example.com/a/zstd/internal/x", at("a/zstd/internal/x"), "example.com/a", at("a"), false)
	main := modPkg("example.com/main", at("main"), "example.com/main", at("main"), true)
	b := modPkg("example.com/b", at("b"), "example.com/b", at("b"), false)

	for _, tt := range []struct {
		name      string
		pkgs      []pkg
		wantFiles map[string][]string // module → its files
		wantErr   string
	}{
		{
			name: "root and subpackage licenses, main module left out",
			pkgs: []pkg{std, a, ax, main},
			wantFiles: map[string][]string{
				"go":            {"LICENSE"},
				"example.com/a": {"LICENSE", "NOTICE", "zstd/internal/x/LICENSE.txt"},
			},
		},
		{name: "a module without a license", pkgs: []pkg{a, b}, wantErr: "example.com/b"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mods, err := collect(tt.pkgs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]string{}
			for _, m := range mods {
				for _, f := range m.files {
					got[m.path] = append(got[m.path], f.name)
				}
			}
			if len(got) != len(tt.wantFiles) {
				t.Errorf("modules = %v, want %v", got, tt.wantFiles)
			}
			for mod, want := range tt.wantFiles {
				if !slices.Equal(got[mod], want) {
					t.Errorf("%s: files %v, want %v", mod, got[mod], want)
				}
			}
		})
	}
}

func TestAncestors(t *testing.T) {
	t.Parallel()
	got := ancestors("/m/a/b", "/m")
	if want := []string{"/m/a/b", "/m/a", "/m"}; !slices.Equal(got, want) {
		t.Errorf("ancestors = %v, want %v", got, want)
	}
	if got := ancestors("/elsewhere", "/m"); !slices.Equal(got, []string{"/m"}) {
		t.Errorf("outside the module: %v, want [/m]", got)
	}
}

// TestEdgeNotices runs the generator on the edge binary's packages, as
// `make deb` does.
func TestEdgeNotices(t *testing.T) {
	t.Parallel()
	pkgs, err := listPackages([]string{"github.com/maatproxy/maat/cmd/edge"})
	if err != nil {
		t.Fatal(err)
	}
	mods, err := collect(pkgs)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := write(&b, mods); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, want := range []string{
		"Copyright (c) 2023 FoxIO",                                        // JA4's BSD-3 notice
		"FoxIO License 1.1",                                               // JA4H named
		"github.com/quic-go/quic-go ",                                     // a direct dependency
		"github.com/klauspost/compress v",                                 // and its subpackage's own license:
		"zstd/internal/xxhash/LICENSE.txt",                                //
		"go, LICENSE\n",                                                   // the standard library
		"Copyright 2009 The Go Authors",                                   //
		"github.com/prometheus/client_golang v1.25.0, NOTICE",             // Apache NOTICE files
		"github.com/maatproxy/maat/policy (embedded), anubisdata/LICENSE", // Anubis's policy tree, embedded
		"Copyright (c) 2025 Xe Iaso",                                      // its MIT notice
	} {
		if !strings.Contains(text, want) {
			t.Errorf("copyright file lacks %q", want)
		}
	}
	if !regexp.MustCompile(`(?m)^github\.com/prometheus/client_golang v\S+, NOTICE$`).MatchString(text) {
		t.Error("copyright file lacks client_golang's Apache NOTICE file")
	}
	if strings.Contains(text, "github.com/maatproxy/maat ") {
		t.Error("the copyright file lists Maat's own module among the dependencies")
	}
}
