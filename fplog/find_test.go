package fplog

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// rotatedLog writes a log at dir/fp.jsonl with two rotations: the older
// gzipped, the newer both plain and gzipped (mid compression), and files
// beside it that are not its rotations. Request IDs are "id-<file>-<n>".
func rotatedLog(t *testing.T) (path string, want []string) {
	t.Helper()
	dir := t.TempDir()
	path = filepath.Join(dir, "fp.jsonl")
	lines := func(file string, n int, extra string) []byte {
		var b bytes.Buffer
		for i := range n {
			r := Record{Time: testTime, RequestID: "id-" + file + "-" + string(rune('a'+i)), Action: ActionDeny, Rules: []string{"no-admin"}, Weight: 7}
			b.Write(append(r.AppendJSON(nil), '\n'))
			if i == 0 {
				b.WriteString(extra)
			}
		}
		return b.Bytes()
	}
	gz := func(b []byte) []byte {
		var out bytes.Buffer
		zw := gzip.NewWriter(&out)
		zw.Write(b)
		zw.Close()
		return out.Bytes()
	}
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("fp.jsonl", lines("cur", 3, "{not json\n"))
	newer := lines("new", 3, `{"request_id":"x","path":"`+strings.Repeat("a", MaxLineBytes)+"\"}\n")
	write("fp-2026-12-06T10-00-00.000.jsonl", newer)
	write("fp-2026-12-06T10-00-00.000.jsonl.gz", gz(newer))
	write("fp-2026-12-05T10-00-00.000.jsonl.gz", gz(lines("old", 3, "garbage\n")))
	write("fp-notatime.jsonl.gz", gz(lines("no", 1, "")))
	write("other-2026-12-05T10-00-00.000.jsonl", lines("no", 1, ""))
	return path, []string{
		path,
		filepath.Join(dir, "fp-2026-12-06T10-00-00.000.jsonl.gz"),
		filepath.Join(dir, "fp-2026-12-05T10-00-00.000.jsonl.gz"),
	}
}

func TestFiles(t *testing.T) {
	t.Parallel()
	path, want := rotatedLog(t)
	got, err := Files(path)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("Files = %q, %v; want %q", got, err, want)
	}
	// The current file gone (renamed aside, not yet reopened): the
	// rotated files are still listed.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if got, err := Files(path); err != nil || !slices.Equal(got, want[1:]) {
		t.Fatalf("without the current file: Files = %q, %v; want %q", got, err, want[1:])
	}
	missing := filepath.Join(t.TempDir(), "fp.jsonl")
	if _, err := Files(missing); !errors.Is(err, ErrNoLog) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing log: err = %v, want ErrNoLog naming %s", err, missing)
	}
	if _, err := Files(filepath.Join(t.TempDir(), "nodir", "fp.jsonl")); !errors.Is(err, ErrNoLog) {
		t.Errorf("missing directory: err = %v, want ErrNoLog", err)
	}
	if _, err := Files(t.TempDir()); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("a directory: err = %v, want one that says so", err)
	}
}

func TestFind(t *testing.T) {
	t.Parallel()
	_, files := rotatedLog(t)
	ctx := context.Background()
	tests := []struct {
		id       string
		file     string
		line     int64
		bad      int64
		read     int
		notFound bool
	}{
		{id: "id-cur-a", file: files[0], line: 1, read: 1},
		{id: "id-cur-c", file: files[0], line: 4, bad: 1, read: 1},
		{id: "id-new-b", file: files[1], line: 3, bad: 2, read: 2},
		{id: "id-old-c", file: files[2], line: 4, bad: 3, read: 3},
		{id: "id-no-a", notFound: true, bad: 3, read: 3},
		{id: "id-cur", notFound: true, bad: 3, read: 3}, // a prefix of IDs is no ID
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel()
			got, err := Find(ctx, files, tt.id)
			if tt.notFound {
				if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), tt.id) {
					t.Fatalf("err = %v, want ErrNotFound naming the ID", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !tt.notFound && (got.Record.RequestID != tt.id || got.Record.Action != ActionDeny || got.Record.Weight != 7 || !slices.Equal(got.Record.Rules, []string{"no-admin"})) {
				t.Errorf("record = %+v", got.Record)
			}
			if got.File != tt.file || got.Line != tt.line || got.Bad != tt.bad || got.Read != tt.read {
				t.Errorf("found in %s:%d, bad %d, read %d; want %s:%d, bad %d, read %d",
					got.File, got.Line, got.Bad, got.Read, tt.file, tt.line, tt.bad, tt.read)
			}
		})
	}
	t.Run("file gone", func(t *testing.T) {
		t.Parallel()
		gone := append([]string{filepath.Join(t.TempDir(), "pruned.jsonl.gz")}, files...)
		got, err := Find(ctx, gone, "id-old-a")
		if err != nil || got.Missing != 1 || got.File != files[2] {
			t.Errorf("Find = %+v, %v; want found after one missing file", got, err)
		}
	})
	t.Run("compressed since listed", func(t *testing.T) {
		t.Parallel()
		plain := strings.TrimSuffix(files[2], ".gz")
		got, err := Find(ctx, []string{plain}, "id-old-b")
		if err != nil || got.File != files[2] || got.Missing != 0 {
			t.Errorf("Find = %+v, %v; want found in %s", got, err, files[2])
		}
	})
	t.Run("corrupt gzip", func(t *testing.T) {
		t.Parallel()
		bad := filepath.Join(t.TempDir(), "fp-2026-12-05T10-00-00.000.jsonl.gz")
		if err := os.WriteFile(bad, []byte{0x1f, 0x8b, 8, 0, 0}, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Find(ctx, []string{bad}, "id-old-a"); err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), bad) {
			t.Errorf("err = %v, want a read error naming the file", err)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		t.Parallel()
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := Find(cctx, files, "id-old-a"); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
}

func TestFindEscapedID(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "fp.jsonl")
	r := Record{RequestID: "a<b>&c", Action: ActionAllow}
	line := r.AppendJSON(nil)
	if err := os.WriteFile(p, append(line, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Find(context.Background(), []string{p}, "a<b>&c")
	if err != nil || got.Record.RequestID != "a<b>&c" {
		t.Errorf("Find = %+v, %v (line %s)", got, err, line)
	}
}
