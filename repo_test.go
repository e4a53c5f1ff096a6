package maat_test

import (
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/maatproxy/maat/internal/testenv"
)

// TestNoLogsCommitted: no log file is in the repository outside a testdata
// directory: a demo run's edge-fp.jsonl was once committed with the package
// by accident (dist/), and .gitignore now keeps *.jsonl and *.log out.
func TestNoLogsCommitted(t *testing.T) {
	t.Parallel()
	git := testenv.NeedCommand(t, "git")
	out, err := exec.Command(git, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	var bad []string
	for name := range strings.SplitSeq(strings.TrimRight(string(out), "\x00"), "\x00") {
		ext := path.Ext(name)
		if (ext == ".jsonl" || ext == ".log" || strings.HasSuffix(name, ".jsonl.gz") || strings.HasSuffix(name, ".log.gz")) &&
			!slices.Contains(strings.Split(path.Dir(name), "/"), "testdata") {
			bad = append(bad, name)
		}
	}
	if len(bad) > 0 {
		t.Errorf("log files committed outside testdata/: %q; git rm them", bad)
	}
	// .gitignore keeps new ones out: git says it ignores a log anywhere
	// but under testdata/.
	for name, ignored := range map[string]bool{"dist/edge-fp.jsonl": true, "edge-fp.jsonl": true, "a/b/access.log": true,
		"fp-2026-12-06T10-00-00.000.jsonl.gz": true, "httpfp/testdata/clients.jsonl": false} {
		err := exec.Command(git, "check-ignore", "-q", "--no-index", name).Run()
		if got := err == nil; got != ignored {
			t.Errorf("git check-ignore %s: ignored %v, want %v", name, got, ignored)
		}
	}
}
