package edge

import (
	"runtime/debug"
	"testing"
)

// TestBuildInfo: what `edge version` says for the ways a binary is built.
func TestBuildInfo(t *testing.T) {
	t.Parallel()
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2025-06-01T10:00:00Z"}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tt := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"go install …@v1.2.0", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/maatproxy/maat", Version: "v1.2.0"}},
			true, "edge v1.2.0 go1.26.0"},
		{"a build in a clone", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.1-0.20250601100000-3f2a9c1d07e5+dirty"},
			Settings: vcs("3f2a9c1d07e5aa0b1c2d3e4f5a6b7c8d9e0f1a2b", "true")},
			true, "edge v1.2.1-0.20250601100000-3f2a9c1d07e5+dirty (commit 3f2a9c1d07e5, modified, 2025-06-01T10:00:00Z) go1.26.0"},
		{"stamping off", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			true, "edge (devel) (built without version stamping: go install …@version, or go build -buildvcs=true in a clone, records it) go1.26.0"},
		{"no build information", nil, false, "edge (unknown) (unknown)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := buildInfo(tt.bi, tt.ok).String(); got != tt.want {
				t.Errorf("%q\nwant %q", got, tt.want)
			}
		})
	}
}
