// Package staticfuzz holds the fuzz targets of package static: the check of
// the Range header, which clients fill, before a file or an upstream
// answers it.
package staticfuzz

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

var seedRanges = []string{
	"bytes=0-99",
	"bytes=0-1023,-1024",
	"bytes=-1,-1,-1,-1",
	"bytes=0-,0-,0-",
	"bytes=0-499,400-999",
	"bytes=1000-1999, 0-99 ,5000-",
	"bytes=0-0,2-2,4-4,6-6",
	"bytes=999999-,0-9",
	"Bytes=0-9,5-6",
	"bytes=x-y,0-1",
	"bytes=,,,",
	"bytes=-0,-0",
	"bytes=+1-+2,-+3",
	"bytes=9223372036854775807-,0-9223372036854775807",
	"items=0-1",
	"bytes=" + strings.Repeat("-1,", 150) + "-1",
}

// ows is the white space around the elements of a Range header that
// net/http's ServeContent trims (textproto.TrimString).
const ows = " \t\r\n"

// spanOf reads one range of a byte-range set independently of the package:
// first and last byte, last -1 for "first-", first -1 for a suffix.
func spanOf(elem string) (first, last int64, ok bool) {
	elem = strings.Trim(elem, ows)
	i := strings.IndexByte(elem, '-')
	if i < 0 {
		return 0, 0, false
	}
	a, b := strings.Trim(elem[:i], ows), strings.Trim(elem[i+1:], ows)
	n := func(s string) (int64, bool) {
		v, err := strconv.ParseInt(s, 10, 64)
		return v, err == nil && v >= 0 && s[0] != '-'
	}
	switch {
	case a == "" && b == "":
		return 0, 0, false
	case a == "":
		v, ok := n(b)
		return -1, v, ok
	case b == "":
		v, ok := n(a)
		return v, -1, ok
	}
	x, ok1 := n(a)
	y, ok2 := n(b)
	return x, y, ok1 && ok2 && x <= y
}

// FuzzLimitRanges checks LimitRanges on any Range header: a header it keeps
// is untouched, holds at most limit ranges and no two well-formed ranges
// that share a byte whatever the size; one it drops is gone.
func FuzzLimitRanges(f *testing.F) {
	for _, s := range seedRanges {
		f.Add(s, 0)
		f.Add(s, 2)
	}
	f.Fuzz(func(t *testing.T, v string, limit int) {
		limit %= 300
		h := http.Header{"Range": {v}}
		dropped := static.LimitRanges(h, limit)
		if limit <= 0 {
			limit = static.DefaultMaxRanges
		}
		if dropped {
			if _, ok := h["Range"]; ok {
				t.Fatalf("dropped, but Range is %q", h["Range"])
			}
			return
		}
		if got := h["Range"]; len(got) != 1 || got[0] != v {
			t.Fatalf("kept, but Range changed from %q to %q", v, got)
		}
		if len(v) < 6 || !strings.EqualFold(v[:6], "bytes=") {
			return // not a byte-range set: left to the server
		}
		var elems []string
		for _, e := range strings.Split(v[6:], ",") {
			if strings.Trim(e, ows) != "" {
				elems = append(elems, e)
			}
		}
		if len(elems) > limit {
			t.Fatalf("kept %d ranges, limit %d: %q", len(elems), limit, v)
		}
		type span struct{ first, last int64 }
		var spans []span
		suffixes := 0
		for _, e := range elems {
			first, last, ok := spanOf(e)
			if !ok {
				continue // malformed: the server's to refuse
			}
			if first < 0 {
				suffixes++
				continue
			}
			if last < 0 {
				last = 1<<63 - 1
			}
			spans = append(spans, span{first, last})
		}
		if suffixes > 1 {
			t.Fatalf("kept %d suffix ranges: %q", suffixes, v)
		}
		for i, a := range spans {
			for _, b := range spans[i+1:] {
				if a.first <= b.last && b.first <= a.last {
					t.Fatalf("kept overlapping ranges %v and %v: %q", a, b, v)
				}
			}
		}
	})
}

// FuzzServeRanges serves a file of 1000 bytes with any Range header and
// checks the answer: the whole file (200), 416, or a 206 whose parts are
// the bytes their Content-Range names, at most DefaultMaxRanges of them,
// sharing no byte, so that the body is never much larger than the file.
func FuzzServeRanges(f *testing.F) {
	for _, s := range seedRanges {
		f.Add(s)
	}
	content := make([]byte, 1000)
	for i := range content {
		content[i] = byte(i * 7)
	}
	dir := f.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.bin"), content, 0o644); err != nil {
		f.Fatal(err)
	}
	h, err := static.New(static.Config{Root: dir})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, v string) {
		req := httptest.NewRequest("GET", "/f.bin", nil)
		req.Header.Set("Range", v)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body := rec.Body.Bytes()
		switch rec.Code {
		case 200:
			if !bytes.Equal(body, content) {
				t.Fatalf("200 with %d bytes", len(body))
			}
			return
		case 416:
			return
		case 206:
		default:
			t.Fatalf("status %d", rec.Code)
		}
		if len(body) > len(content)+static.DefaultMaxRanges*256 {
			t.Fatalf("a %d-byte body for a %d-byte file: %q", len(body), len(content), v)
		}
		seen := make([]bool, len(content))
		parts := 0
		check := func(cr string, b []byte) {
			parts++
			var first, last, size int
			if _, err := fmt.Sscanf(cr, "bytes %d-%d/%d", &first, &last, &size); err != nil || size != len(content) || first < 0 || last >= size || last-first+1 != len(b) {
				t.Fatalf("Content-Range %q for %d bytes", cr, len(b))
			}
			if !bytes.Equal(b, content[first:last+1]) {
				t.Fatalf("part %s holds other bytes", cr)
			}
			for i := first; i <= last; i++ {
				if seen[i] {
					t.Fatalf("byte %d sent twice for %q", i, v)
				}
				seen[i] = true
			}
		}
		mt, params, _ := mime.ParseMediaType(rec.Header().Get("Content-Type"))
		if mt != "multipart/byteranges" {
			check(rec.Header().Get("Content-Range"), body)
			return
		}
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		for {
			p, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(p)
			if err != nil {
				t.Fatal(err)
			}
			check(p.Header.Get("Content-Range"), b)
		}
		if parts > static.DefaultMaxRanges {
			t.Fatalf("%d parts for %q", parts, v)
		}
	})
}
