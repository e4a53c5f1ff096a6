package static_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/maatproxy/maat/static"
)

// part is one range of a 206 response: its Content-Range and its bytes.
type part struct {
	contentRange string
	body         []byte
}

// partsOf returns the ranges of a 206 response, one for a single range or
// each part of a multipart/byteranges body.
func partsOf(t *testing.T, resp *http.Response, body []byte) []part {
	t.Helper()
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/byteranges" {
		return []part{{resp.Header.Get("Content-Range"), body}}
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	var parts []part
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return parts
		}
		must(t, err)
		b, err := io.ReadAll(p)
		must(t, err)
		parts = append(parts, part{p.Header.Get("Content-Range"), b})
	}
}

// ranges joins n ranges made by f(i) into a Range header.
func ranges(n int, f func(i int) string) string {
	rs := make([]string, n)
	for i := range rs {
		rs[i] = f(i)
	}
	return "Range: bytes=" + strings.Join(rs, ",")
}

func TestRangeLimits(t *testing.T) {
	t.Parallel()
	const size = 180 << 10 // the file of the report: 180 KB
	content := make([]byte, size)
	for i := range content {
		content[i] = byte('a' + i%26)
	}
	files := map[string]string{"big.pdf": string(content), "app.js": appJS, "app.js.zst": "ZSTD BYTES"}
	s := newSite(t, static.Config{Precompressed: true}, files)
	small := newSite(t, static.Config{MaxRanges: 2}, files)
	cr := func(first, last int) string { return fmt.Sprintf("bytes %d-%d/%d", first, last, size) }
	slice := func(first, last int) []byte { return content[first : last+1] }
	tests := []struct {
		name   string
		s      *site
		path   string
		header []string
		status int
		whole  string // with 200: the body expected
		parts  []part // with 206
	}{
		// The attack: sixty thousand one-byte suffixes gave 9.5 MB.
		{"attack", s, "/big.pdf", []string{ranges(60000, func(int) string { return "-1" })}, 200, string(content), nil},
		{"attack on a precompressed sibling", s, "/app.js", []string{"Accept-Encoding: zstd", ranges(60000, func(int) string { return "-1" })}, 200, "ZSTD BYTES", nil},
		{"one more than the limit", s, "/big.pdf", []string{ranges(static.DefaultMaxRanges+1, func(i int) string { return fmt.Sprintf("%d-%d", 2*i, 2*i) })}, 200, string(content), nil},
		{"configured limit", small, "/big.pdf", []string{"Range: bytes=0-0,2-2,4-4"}, 200, string(content), nil},
		{"sent twice", s, "/big.pdf", []string{"Range: bytes=0-9", "Range: bytes=20-29"}, 200, string(content), nil},
		{"overlapping suffixes merged", s, "/big.pdf", []string{ranges(static.DefaultMaxRanges, func(int) string { return "-1" })}, 206, "",
			[]part{{cr(size-1, size-1), slice(size-1, size-1)}}},
		{"whole file thrice merged", s, "/big.pdf", []string{"Range: bytes=0-,0-,0-"}, 206, "",
			[]part{{cr(0, size-1), content}}},
		{"overlap merged", s, "/big.pdf", []string{"Range: bytes=0-499,400-999"}, 206, "",
			[]part{{cr(0, 999), slice(0, 999)}}},
		{"adjacent merged, order ascending", s, "/big.pdf", []string{"Range: bytes=5000-5099,100-199,0-99"}, 206, "",
			[]part{{cr(0, 199), slice(0, 199)}, {cr(5000, 5099), slice(5000, 5099)}}},
		{"merged over an unsatisfiable one", s, "/big.pdf", []string{"Range: bytes=999999-,0-9,5-19"}, 206, "",
			[]part{{cr(0, 19), slice(0, 19)}}},
		// Honest requests are served as asked.
		{"pdf reader: head and trailer", s, "/big.pdf", []string{"Range: bytes=0-1023,-1024"}, 206, "",
			[]part{{cr(0, 1023), slice(0, 1023)}, {cr(size-1024, size-1), slice(size-1024, size-1)}}},
		{"unordered kept in order", s, "/big.pdf", []string{"Range: bytes=1000-1999,0-99,50000-"}, 206, "",
			[]part{{cr(1000, 1999), slice(1000, 1999)}, {cr(0, 99), slice(0, 99)}, {cr(50000, size-1), slice(50000, size-1)}}},
		{"at the limit", s, "/big.pdf", []string{ranges(static.DefaultMaxRanges, func(i int) string { return fmt.Sprintf("%d-%d", 1000*i, 1000*i) })}, 206, "", nil},
		{"single", s, "/big.pdf", []string{"Range: bytes=10-19"}, 206, "", []part{{cr(10, 19), slice(10, 19)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, body := tt.s.do(t, "GET", tt.path, tt.header...)
			if resp.StatusCode != tt.status {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tt.status)
			}
			if tt.status == 200 {
				if string(body) != tt.whole {
					t.Fatalf("body of %d bytes, want the whole %d", len(body), len(tt.whole))
				}
				return
			}
			parts := partsOf(t, resp, body)
			if tt.parts == nil { // at the limit: each of the ranges asked
				if len(parts) != static.DefaultMaxRanges {
					t.Fatalf("%d parts, want %d", len(parts), static.DefaultMaxRanges)
				}
				for i, p := range parts {
					if want := cr(1000*i, 1000*i); p.contentRange != want || !bytes.Equal(p.body, slice(1000*i, 1000*i)) {
						t.Fatalf("part %d = %s %q, want %s", i, p.contentRange, p.body, want)
					}
				}
			} else if len(parts) != len(tt.parts) {
				t.Fatalf("%d parts, want %d", len(parts), len(tt.parts))
			}
			for i, p := range tt.parts {
				if parts[i].contentRange != p.contentRange || !bytes.Equal(parts[i].body, p.body) {
					t.Errorf("part %d = %s (%d bytes), want %s (%d bytes)", i, parts[i].contentRange, len(parts[i].body), p.contentRange, len(p.body))
				}
			}
			if len(body) > size+static.DefaultMaxRanges*256 {
				t.Errorf("a %d-byte body for a %d-byte file", len(body), size)
			}
		})
	}
}

func TestRangeErrorsKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("0123456789"), 0o644))
	h, err := static.New(static.Config{Root: dir})
	must(t, err)
	tests := []struct {
		name, rng string
		status    int
	}{
		{"unsatisfiable", "bytes=100-,200-", 416},
		{"malformed", "bytes=a-b,0-1,0-1", 416},
		{"other unit", "items=0-1,0-1", 416},
		{"upper case unit", "BYTES=0-1,0-1", 416}, // as ServeContent reads it
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest("GET", "/a.txt", nil)
			req.Header.Set("Range", tt.rng)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Fatalf("Range %q: status %d, want %d", tt.rng, rec.Code, tt.status)
			}
			if req.Header.Get("Range") != tt.rng {
				t.Fatalf("the request's Range header changed to %q", req.Header.Get("Range"))
			}
		})
	}
}

func TestLimitRanges(t *testing.T) {
	t.Parallel()
	many := func(n int, r string) string { return "bytes=" + strings.Repeat(r+",", n-1) + r }
	tests := []struct {
		name   string
		values []string // the Range header's lines; nil = none
		limit  int
		drop   bool
	}{
		{"none", nil, 0, false},
		{"single", []string{"bytes=0-99"}, 0, false},
		{"pdf reader", []string{"bytes=0-1023,-1024"}, 0, false},
		{"disjoint unordered", []string{"bytes=1000-1999, 0-99 ,5000-"}, 0, false},
		{"adjacent", []string{"bytes=0-99,100-199"}, 0, false},
		{"at the default limit", []string{rangesOf(static.DefaultMaxRanges)}, 0, false},
		{"over the default limit", []string{rangesOf(static.DefaultMaxRanges + 1)}, 0, true},
		{"over a given limit", []string{"bytes=0-0,2-2,4-4"}, 2, true},
		{"the attack", []string{many(60000, "-1")}, 0, true},
		{"two suffixes", []string{"bytes=-1,-1"}, 0, true},
		{"overlap", []string{"bytes=0-99,50-150"}, 0, true},
		{"open and explicit", []string{"bytes=100-,0-99,150-199"}, 0, true},
		{"two open", []string{"bytes=500-,100-"}, 0, true},
		{"same range", []string{"bytes=7-7,7-7"}, 0, true},
		{"sent twice", []string{"bytes=0-1", "bytes=5-6"}, 0, true},
		{"unit case", []string{"Bytes=0-99,50-60"}, 0, true},
		{"other unit", []string{"items=0-9,0-9"}, 0, false},
		{"malformed", []string{"bytes=x-y,0-1,5-1"}, 0, false},
		{"overlap beside a malformed range", []string{"bytes=x-y,0-1,0-1"}, 0, true},
		{"overlap at the end of the numbers", []string{"bytes=9223372036854775807-,0-9223372036854775807"}, 0, true},
		{"overlap with an earlier, longer range", []string{"bytes=0-100,10-20,50-60"}, 0, true},
		{"blank elements", []string{"bytes=0-1,,, ,5-6"}, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{"Accept": {"*/*"}}
			if tt.values != nil {
				h["Range"] = append([]string(nil), tt.values...)
			}
			dropped := static.LimitRanges(h, tt.limit)
			if dropped != tt.drop {
				t.Fatalf("LimitRanges = %v, want %v", dropped, tt.drop)
			}
			switch {
			case dropped && h["Range"] != nil:
				t.Errorf("Range still there: %q", h["Range"])
			case !dropped && strings.Join(h["Range"], "|") != strings.Join(tt.values, "|"):
				t.Errorf("Range changed to %q", h["Range"])
			}
			if h.Get("Accept") != "*/*" {
				t.Errorf("other headers changed: %v", h)
			}
		})
	}
}

// rangesOf returns a Range value of n disjoint one-byte ranges.
func rangesOf(n int) string {
	rs := make([]string, n)
	for i := range rs {
		rs[i] = strconv.Itoa(2*i) + "-" + strconv.Itoa(2*i)
	}
	return "bytes=" + strings.Join(rs, ",")
}
