package fplogfuzz

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maatproxy/maat/fplog"
)

// FuzzFind checks that Find reads any bytes before a record without
// failing, and finds the record by its request ID: garbage lines are
// skipped, never mistaken for the record.
func FuzzFind(f *testing.F) {
	for _, s := range seedLines {
		f.Add([]byte(s), "1z4q8vk-5d")
	}
	f.Add([]byte("{\"request_id\":\"a<b\"\n\x00\xff"), "a<b")
	f.Add([]byte(strings.Repeat("{", 3000)), `x&y`)
	f.Fuzz(func(t *testing.T, garbage []byte, id string) {
		if id == "" || len(id) > 128 || strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == '"' || r == '\\' }) {
			return // not a request ID the edge accepts
		}
		r := fplog.Record{RequestID: id, Action: fplog.ActionDeny, Weight: 42}
		data := append(append([]byte("x"), garbage...), '\n')
		data = append(r.AppendJSON(data), '\n')
		p := filepath.Join(t.TempDir(), "fp.jsonl")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := fplog.Find(context.Background(), []string{p}, id)
		if err != nil {
			t.Fatalf("Find(%q): %v", id, err)
		}
		if got.Record.RequestID != id {
			t.Fatalf("Find(%q) found %q", id, got.Record.RequestID)
		}
	})
}
