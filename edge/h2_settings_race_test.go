package edge

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestH2HeaderTableSizeMidConnection: a client that sends
// SETTINGS_HEADER_TABLE_SIZE while responses are being written gets every
// response, each header block decodable. net/http's HTTP/2 server (Go
// 1.26.8's h2_bundle.go, processSetting) applies the setting to its HPACK
// encoder at once, while a response's headers may be encoded by
// writeFrameAsync on another goroutine: a data race on the encoder, which
// the race detector reports, and which corrupts header blocks: against a
// plain net/http server, this client met COMPRESSION_ERROR in 2 runs of 10
// without -race, against x/net v0.63's http2.Server (which defers the
// change until no frame is being written, server.go's
// pendingEncoderTableSize) in none. The client re-sends the size it has,
// 4096, so that nothing but the encoder's state changes.
func TestH2HeaderTableSizeMidConnection(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("b", 6000) // a header block larger than the write buffer: written async
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", big)
		fmt.Fprint(w, r.URL.Path)
	}))
	t.Cleanup(up.Close)
	const n = 60
	e := startEdge(t, "policy: \"\"\nsites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	conn, err := tls.Dial("tcp", e.Addrs().HTTPS, e.tlsConfig("h2"))
	if err != nil {
		t.Fatal(err)
	}
	headerTableSizeClient(t, conn, n, big)
}

func headerTableSizeClient(t *testing.T, conn *tls.Conn, n int, big string) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second)) // bounds a hang only
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for i := range n {
		if i%5 == 4 { // the size it has: nothing changes but the encoder's state
			fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 4096})
		}
		hb.Reset()
		for _, f := range [][2]string{{":method", "GET"}, {":authority", "localhost"}, {":scheme", "https"},
			{":path", fmt.Sprintf("/r/%d", i)}, {"user-agent", "Go-http-client/2.0"}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for got < n {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d of %d responses: %v (%v)", got, n, err, fr.ErrorDetail())
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			if f.PseudoValue("status") != "200" || len(f.RegularFields()) == 0 {
				t.Errorf("stream %d: status %q", f.StreamID, f.PseudoValue("status"))
			}
			for _, hf := range f.RegularFields() {
				if strings.EqualFold(hf.Name, "x-big") && hf.Value != big {
					t.Errorf("stream %d: X-Big of %d bytes, want %d", f.StreamID, len(hf.Value), len(big))
				}
			}
			got++
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY after %d of %d responses: %v %s", got, n, f.ErrCode, f.DebugData())
		case *http2.RSTStreamFrame:
			t.Fatalf("RST_STREAM %d: %v", f.StreamID, f.ErrCode)
		}
	}
}
