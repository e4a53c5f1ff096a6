package testattack

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// TestBigHeaderList: the list is as long as asked once encoded (one field
// more at most), every field is sent never indexed, so that a connection's
// second request is as long as its first, and it decodes to what was sent.
func TestBigHeaderList(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 16 << 10, 460 << 10} {
		fields, size := bigHeaderList(n)
		var buf bytes.Buffer
		enc := hpack.NewEncoder(&buf)
		for range 2 { // a second request on the same connection
			buf.Reset()
			for _, f := range fields {
				_ = enc.WriteField(f)
			}
			if buf.Len() != size {
				t.Errorf("n=%d: encoded %d bytes, the list said %d", n, buf.Len(), size)
			}
		}
		if size < n || size > n+1100 {
			t.Errorf("n=%d: encoded %d bytes, want at least n and one field more at most", n, size)
		}
		got, err := hpack.NewDecoder(4096, nil).DecodeFull(buf.Bytes())
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if len(got) != len(fields) || got[0] != fields[0] || decodedSize(got) != decodedSize(fields) {
			t.Errorf("n=%d: decoded %d fields (%d bytes), sent %d (%d bytes)", n, len(got), decodedSize(got), len(fields), decodedSize(fields))
		}
	}
}
