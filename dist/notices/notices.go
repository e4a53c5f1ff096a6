// Command notices writes the copyright file of the Debian package
// (/usr/share/doc/edge/copyright): Maat's own license, the notices the JA4
// specifications ask for, and the license files of every Go module linked
// into the binary, as each module ships them. The MIT, BSD and Apache
// licenses of those modules ask that a binary distribution carry their
// notices; this is where the package carries them.
//
// It reads the packages the binary is built from with `go list -deps -json`
// (so run it with the same GOOS, GOARCH and CGO_ENABLED as the build), and
// for each package collects the files named LICENSE*, LICENCE*, COPYING*
// and NOTICE* in its directory and every directory above it up to its
// module's root: a module's subpackages may carry licenses of their own
// (klauspost/compress's zstd/internal/xxhash is MIT inside a BSD module). A
// module without any license file is an error: it cannot be shipped.
//
//	go run ./dist/notices -o bin/deb/copyright ./cmd/edge
package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// ja4License is FoxIO's LICENSE-JA4 (github.com/FoxIO-LLC/ja4, commit
// 1c504e2c4f908683221bc2f4a9df373453f14f9c), the BSD-3-Clause license of the
// JA4 TLS client fingerprint that tlsfp implements.
//
//go:embed LICENSE-JA4
var ja4License string

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "notices:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("notices", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "-", `output file ("-" = stdout)`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	patterns := fs.Args()
	if len(patterns) == 0 {
		patterns = []string{"./cmd/edge"}
	}
	pkgs, err := listPackages(patterns)
	if err != nil {
		return err
	}
	mods, err := collect(pkgs)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := write(&b, mods); err != nil {
		return err
	}
	if *out == "-" {
		_, err = stdout.Write(b.Bytes())
		return err
	}
	return os.WriteFile(*out, b.Bytes(), 0o644)
}

// pkg is what `go list -json` says of a package that matters here.
type pkg struct {
	ImportPath string
	Dir        string
	EmbedFiles []string // relative to Dir
	Standard   bool
	Goroot     string `json:"-"` // set on the standard library's packages by listPackages
	Module     *struct {
		Path    string
		Version string
		Dir     string
		Main    bool
		Replace *struct {
			Path    string
			Version string
			Dir     string
		}
	}
}

// listPackages runs `go list -deps -json` on patterns.
func listPackages(patterns []string) ([]pkg, error) {
	cmd := exec.Command("go", append([]string{"list", "-deps", "-json"}, patterns...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOROOT: %w", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		if p.Standard {
			p.Goroot = strings.TrimSpace(string(goroot))
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

// module is one module's license files, read.
type module struct {
	path, version string
	files         []licenseFile
}

type licenseFile struct {
	name string // relative to the module root, slash-separated
	text string
}

// collect gathers the license files of the modules pkgs come from. Maat's
// own module is left out (its license heads the file), but for the
// license files its packages embed with the third-party files they ship
// (policy's copy of Anubis's policy tree); the standard library is the
// module "go".
func collect(pkgs []pkg) ([]module, error) {
	byPath := map[string]*module{}
	seen := map[string]bool{}
	var missing []string
	for _, p := range pkgs {
		var modPath, version, root string
		switch {
		case p.Standard:
			modPath, version, root = "go", "", filepath.Join(p.Goroot, "src")
		case p.Module == nil:
			return nil, fmt.Errorf("package %s is in no module", p.ImportPath)
		case p.Module.Main:
			if m := embeddedLicenses(p); m != nil {
				byPath[m.path] = m
			}
			continue
		default:
			modPath, version, root = p.Module.Path, p.Module.Version, p.Module.Dir
			if r := p.Module.Replace; r != nil {
				version, root = r.Version, r.Dir
			}
		}
		m := byPath[modPath]
		if m == nil {
			m = &module{path: modPath, version: version}
			byPath[modPath] = m
		}
		dirs := ancestors(p.Dir, root)
		if p.Standard {
			dirs = []string{p.Goroot} // Go's LICENSE is at the root of GOROOT
		}
		for _, dir := range dirs {
			files, err := licenseFiles(dir)
			if err != nil {
				return nil, err
			}
			for _, f := range files {
				if seen[f] {
					continue
				}
				seen[f] = true
				text, err := os.ReadFile(f)
				if err != nil {
					return nil, err
				}
				base := root
				if p.Standard {
					base = p.Goroot
				}
				rel, err := filepath.Rel(base, f)
				if err != nil {
					return nil, err
				}
				m.files = append(m.files, licenseFile{name: filepath.ToSlash(rel), text: string(text)})
			}
		}
	}
	mods := make([]module, 0, len(byPath))
	for _, m := range byPath {
		if len(m.files) == 0 {
			missing = append(missing, m.path)
			continue
		}
		slices.SortFunc(m.files, func(a, b licenseFile) int { return strings.Compare(a.name, b.name) })
		mods = append(mods, *m)
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("no license file in module(s) %s: they cannot be shipped", strings.Join(missing, ", "))
	}
	slices.SortFunc(mods, func(a, b module) int { return strings.Compare(a.path, b.path) })
	return mods, nil
}

// embeddedLicenses returns the license files a package of Maat's own
// module embeds, as a module named after the package, or nil.
func embeddedLicenses(p pkg) *module {
	var m *module
	for _, f := range p.EmbedFiles {
		n := strings.ToUpper(path.Base(f))
		if !strings.HasPrefix(n, "LICENSE") && !strings.HasPrefix(n, "LICENCE") && !strings.HasPrefix(n, "COPYING") && !strings.HasPrefix(n, "NOTICE") {
			continue
		}
		text, err := os.ReadFile(filepath.Join(p.Dir, filepath.FromSlash(f)))
		if err != nil {
			continue // go list named it: the build would fail first
		}
		if m == nil {
			m = &module{path: p.ImportPath + " (embedded)"}
		}
		m.files = append(m.files, licenseFile{name: f, text: string(text)})
	}
	return m
}

// ancestors lists dir and its parents up to root (inclusive), or only root
// when dir is not under it.
func ancestors(dir, root string) []string {
	dir, root = filepath.Clean(dir), filepath.Clean(root)
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return []string{root}
	}
	var out []string
	for d := dir; ; d = filepath.Dir(d) {
		out = append(out, d)
		if d == root || d == filepath.Dir(d) {
			break
		}
	}
	return out
}

// licenseFiles returns the license and notice files directly in dir.
func licenseFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		n := strings.ToUpper(e.Name())
		for _, prefix := range []string{"LICENSE", "LICENCE", "COPYING", "NOTICE"} {
			if strings.HasPrefix(n, prefix) {
				out = append(out, filepath.Join(dir, e.Name()))
				break
			}
		}
	}
	return out, nil
}

const header = `edge: Maat's edge proxy
Source: https://github.com/maatproxy/maat

Copyright: the Maat authors
License: Apache License, Version 2.0. On Debian systems its full text is in
 /usr/share/common-licenses/Apache-2.0; it is also the file LICENSE of the
 source.

Fingerprints: tlsfp implements FoxIO's JA4 TLS client fingerprint
 (https://github.com/FoxIO-LLC/ja4, technical_details/JA4.md), which FoxIO
 publishes under the BSD 3-Clause license below. httpfp implements JA4H,
 which FoxIO publishes under the FoxIO License 1.1
 (https://github.com/FoxIO-LLC/ja4/blob/main/LICENSE: non-commercial use
 only; FoxIO states that JA4+ methods are patent pending). JA4H is off
 unless the configuration turns it on (fingerprints: {ja4h: true}).

The edge binary is statically linked with the Go standard library and the
Go modules below. Each module's license and notice files follow, as the
module ships them; so do those of files of others that it embeds (the
policy package's copy of Anubis's policy tree, MIT).
`

// write writes the copyright file.
func write(w io.Writer, mods []module) error {
	var b strings.Builder
	b.WriteString(header)
	section(&b, "JA4 (FoxIO-LLC/ja4, LICENSE-JA4)", ja4License)
	first := map[string]string{} // text → title of the section that holds it
	for _, m := range mods {
		name := m.path
		if m.version != "" {
			name += " " + m.version
		}
		for _, f := range m.files {
			title := name + ", " + f.name
			if t, ok := first[f.text]; ok {
				section(&b, title, "The same text as "+t+" above.")
				continue
			}
			first[f.text] = title
			section(&b, title, f.text)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func section(b *strings.Builder, title, text string) {
	b.WriteString("\n" + strings.Repeat("-", 76) + "\n" + title + "\n" + strings.Repeat("-", 76) + "\n\n")
	b.WriteString(strings.TrimRight(text, "\n") + "\n")
}
