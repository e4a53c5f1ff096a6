// Package testenv reports whether the external programs a test needs are
// present, in the manner of the standard library's internal/testenv.
//
// Outside CI a missing program skips the test; with CI=true it fails it, so
// that a CI run never passes by skipping silently.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the tests run in CI (the environment variable CI is "true").
func InCI() bool { return os.Getenv("CI") == "true" }

// NeedCommand returns the path of the named program, or ends the test:
// skipped outside CI, failed in CI. Several names are tried in order.
func NeedCommand(t testing.TB, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	Missing(t, "none of %v is installed (make test installs it)", names)
	return ""
}

// Missing ends the test because a dependency is absent: t.Skipf outside CI,
// t.Fatalf with CI=true.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf("missing test dependency: "+format, args...)
	}
	t.Skipf("missing test dependency: "+format, args...)
}
