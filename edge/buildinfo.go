package edge

import (
	"runtime/debug"
	"strings"
)

// BuildInfo is what `edge version` says of the binary, and what the
// Server's first log line says of the build.
type BuildInfo struct {
	// Version is the module version: v1.2.3 for `go install …@v1.2.3` or
	// a build of a tagged commit, a pseudo-version for other commits, and
	// "(devel)" when the build recorded none (VCS stamping off).
	Version string
	// Commit and Modified are the VCS revision the binary was built from
	// and whether the tree had changes; empty and false when not stamped.
	Commit   string
	Modified bool
	// Time is the commit's time (RFC 3339), when stamped.
	Time      string
	GoVersion string
}

// ReadBuildInfo reads the binary's build information.
func ReadBuildInfo() BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	return buildInfo(bi, ok)
}

func buildInfo(bi *debug.BuildInfo, ok bool) BuildInfo {
	if !ok || bi == nil {
		return BuildInfo{Version: "(unknown)", GoVersion: "(unknown)"}
	}
	b := BuildInfo{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if b.Version == "" {
		b.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		case "vcs.time":
			b.Time = s.Value
		}
	}
	return b
}

// String is the line `edge version` prints, e.g.
// "edge v1.2.0 (commit 3f2a9c1d07e5, 2025-06-01T10:00:00Z) go1.26.0".
func (b BuildInfo) String() string {
	var s strings.Builder
	s.WriteString("edge " + b.Version)
	switch {
	case b.Commit != "":
		s.WriteString(" (commit " + b.Commit[:min(12, len(b.Commit))])
		if b.Modified {
			s.WriteString(", modified")
		}
		if b.Time != "" {
			s.WriteString(", " + b.Time)
		}
		s.WriteString(")")
	case b.Version == "(devel)":
		s.WriteString(" (built without version stamping: go install …@version, or go build -buildvcs=true in a clone, records it)")
	}
	s.WriteString(" " + b.GoVersion)
	return s.String()
}
