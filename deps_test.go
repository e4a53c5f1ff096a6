package maat_test

// This file is a statement of policy, like the standard library's
// go/build/deps_test.go: which package of this module may import which.

import (
	"bufio"
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/maatproxy/maat"

// leaves import no package of this module.
var leaves = map[string]bool{
	"tlsfp": true, "httpfp": true, "policy": true, "challenge": true,
	"locales": true, "certs": true, "store": true, "fplog": true,
	"static": true, "compress": true,
	"clientnet": true, "accept": true,
	"proxyproto": true, "geo": true, "firstbytes": true, "urlpath": true,
	"forwarded": true,
}

// shared are the small leaves that hold one fact several leaves need
// (DESIGN.md: "written once … in one small shared leaf"); other leaves may
// import them, and they import no package of ours.
var shared = map[string]bool{"clientnet": true, "accept": true, "firstbytes": true}

// allowed reports whether package from (relative to the module) may import
// package to (also relative) in its non-test code.
func allowed(from, to string) bool {
	top := func(p string) string { return strings.SplitN(p, "/", 2)[0] }
	if strings.HasPrefix(to, "internal/test") {
		// Test helpers never reach a binary; only code generators (run by
		// go generate, never linked), bench programs (run from the tree by
		// make, never shipped) and other test helpers use them.
		return strings.Contains(from, "/internal/gen") || strings.HasPrefix(from, "internal/test") ||
			strings.HasPrefix(from, "bench/")
	}
	switch {
	case shared[top(from)]:
		return top(from) == top(to)
	case leaves[top(from)]:
		return top(from) == top(to) || shared[top(to)] // its own subpackages and the shared facts
	case from == "edge/config": // the configuration file: leaves only
		return leaves[top(to)]
	case from == "edge":
		return leaves[top(to)] || to == "edge/config" || to == "edge/internal/park" ||
			to == "edge/internal/upstream" || to == "edge/internal/spill" ||
			to == "edge/internal/drain" || to == "edge/internal/basicauth" || to == "edge/internal/secret" ||
			to == "edge/internal/console" || to == "edge/internal/procs"
	case from == "edge/internal/upstream":
		return leaves[top(to)] || to == "edge/internal/spill"
	case from == "edge/internal/spill":
		return leaves[top(to)]
	case from == "edge/internal/drain":
		return false // what it needs of the Server is its Tracker interface
	case from == "edge/internal/secret":
		return to == "challenge" // its shortest secret
	case from == "edge/internal/console":
		return to == "fplog" // the actions and the client address modes; upstreams through its interface
	case from == "edge/internal/procs":
		return false // the CPU time and GOMAXPROCS are funcs the Server passes in
	case from == "edge/internal/basicauth":
		return false // the attempt limit is a func the Handler passes in
	case from == "edge/internal/park":
		return leaves[top(to)] // what it needs of the Server is its Host interface
	case from == "cmd/edge":
		return to == "edge" || to == "edge/config" || to == "cmd/edge/internal/ops"
	case from == "cmd/edge/internal/ops":
		return to == "edge" || to == "edge/config" || leaves[top(to)]
	case strings.HasPrefix(from, "fuzz/"), strings.HasPrefix(from, "bench/"):
		return to == "edge" || to == "edge/config" || leaves[top(to)]
	case strings.HasPrefix(from, "internal/"):
		return strings.HasPrefix(to, "internal/") || leaves[top(to)]
	}
	return false
}

func goList(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			t.Fatalf("go list %v: %v\n%s", args, err, ee.Stderr)
		}
		t.Fatalf("go list %v: %v", args, err)
	}
	return out
}

func TestDependencyPolicy(t *testing.T) {
	t.Parallel()
	out := goList(t, "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	seen := 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		from, ok := strings.CutPrefix(f[0], module+"/")
		if !ok {
			continue // the module root holds only this test
		}
		seen++
		for _, imp := range f[1:] {
			to, ours := strings.CutPrefix(imp, module+"/")
			if !ours {
				continue
			}
			if !allowed(from, to) {
				t.Errorf("%s may not import %s (see DESIGN.md, Packages)", from, to)
			}
		}
	}
	if seen == 0 {
		t.Fatal("go list found no packages")
	}
}

// TestBinaryHasNoTestDependencies proves that utls (a test-only parrot
// library) and our test helpers never end up in the edge binary.
func TestBinaryHasNoTestDependencies(t *testing.T) {
	t.Parallel()
	for _, dep := range strings.Fields(string(goList(t, "-deps", "./cmd/edge"))) {
		if strings.Contains(dep, "refraction-networking/utls") || strings.HasPrefix(dep, module+"/internal/test") ||
			strings.Contains(dep, "chromedp") || strings.Contains(dep, "letsencrypt/pebble") ||
			strings.Contains(dep, "summerwind/h2spec") || strings.Contains(dep, "goreleaser/nfpm") {
			t.Errorf("the edge binary depends on %s", dep)
		}
	}
}

func TestPolicyTable(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		from, to string
		want     bool
	}{
		{"edge", "tlsfp", true},
		{"edge", "internal/testclient", false},
		{"tlsfp", "policy", false},
		{"policy", "tlsfp", false},
		{"challenge", "locales", false},
		{"cmd/edge", "edge", true},
		{"cmd/edge", "tlsfp", false},
		{"fuzz/tlsfp", "tlsfp", true},
		{"edge", "proxyproto", true},
		{"edge", "edge/internal/park", true},
		{"edge/internal/park", "httpfp", true},
		{"edge/internal/park", "edge", false},
		{"cmd/edge", "edge/internal/park", false},
		{"proxyproto", "tlsfp", false},
		{"geo", "policy", false},
		{"fuzz/geo", "geo", true},
		{"tlsfp", "tlsfp/internal/gen", true},
		{"tlsfp/internal/genclients", "internal/testclient", true},
		{"tlsfp", "internal/testclient", false},
		{"bench/attack", "internal/testattack", true},
		{"cmd/edge", "internal/testattack", false},
		{"cmd/edge", "cmd/edge/internal/ops", true},
		{"cmd/edge/internal/ops", "edge", true},
		{"cmd/edge/internal/ops", "policy", true},
		{"edge", "cmd/edge/internal/ops", false},
		{"edge", "edge/config", true},
		{"cmd/edge", "edge/config", true},
		{"edge/config", "certs", true},
		{"edge/config", "edge", false},
		{"certs", "edge/config", false},
		{"edge", "edge/internal/upstream", true},
		{"edge/internal/upstream", "edge/internal/spill", true},
		{"edge/internal/upstream", "edge", false},
		{"edge/internal/spill", "edge/internal/upstream", false},
		{"edge/internal/spill", "edge", false},
		{"edge", "forwarded", true},
		{"forwarded", "edge", false},
		{"fuzz/forwarded", "forwarded", true},
		{"edge", "edge/internal/drain", true},
		{"edge/internal/drain", "edge", false},
		{"edge/internal/drain", "httpfp", false},
		{"edge", "edge/internal/basicauth", true},
		{"edge/internal/basicauth", "edge", false},
		{"edge/internal/basicauth", "store", false},
		{"edge", "edge/internal/secret", true},
		{"edge/internal/secret", "challenge", true},
		{"edge/internal/secret", "edge", false},
		{"edge", "edge/internal/console", true},
		{"edge/internal/console", "fplog", true},
		{"edge/internal/console", "edge/internal/upstream", false},
		{"edge/internal/console", "edge", false},
	} {
		if got := allowed(tt.from, tt.to); got != tt.want {
			t.Errorf("allowed(%q, %q) = %v, want %v", tt.from, tt.to, got, tt.want)
		}
	}
}
