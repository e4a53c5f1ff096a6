package edge

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestMalformedAndSlowHellos(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	logs := &syncBuffer{}
	e := startEdgeLog(t, "timeouts: {handshake: 1s}\nsites: [{hosts: [localhost], upstream: "+up.URL+"}]\n", logs)
	for _, tt := range []struct {
		name string
		send []byte
	}{
		{"garbage handshake body", append([]byte{0x16, 0x03, 0x01, 0x00, 0x08}, 0x01, 0x00, 0x00, 0x04, 0xde, 0xad, 0xbe, 0xef)},
		{"huge length", []byte{0x16, 0x03, 0x01, 0xff, 0xff, 0x01, 0xff, 0xff, 0xff}},
		{"not a hello", append([]byte{0x16, 0x03, 0x01, 0x00, 0x04}, 0x02, 0x00, 0x00, 0x00)},
		{"alert record", []byte{0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x28}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", e.Addrs().HTTPS)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, _ = c.Write(tt.send)
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadAll(c); err != nil && strings.Contains(err.Error(), "timeout") {
				t.Fatal("connection not closed")
			}
		})
	}
	// A slowloris hello: half a record, then nothing. The edge hangs up
	// after the handshake timeout.
	c, err := net.Dial("tcp", e.Addrs().HTTPS)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00})
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadAll(c)
	if d := time.Since(start); err != nil || d > 3*time.Second {
		t.Errorf("slow hello: closed after %v (%v), want about 1s", d, err)
	}
	// The lines are written by the connections' goroutines: wait for them.
	waitFor(t, 5*time.Second, func() bool { return strings.Count(logs.String(), "bad_client_hello") >= 3 })
	out := logs.String()
	if n := strings.Count(out, "bad_client_hello"); n < 3 {
		t.Errorf("malformed hellos logged %d times, want one line each:\n%s", n, out)
	}
	if n := strings.Count(out, "tls_handshake_failed"); n > 1 {
		t.Errorf("handshake failures logged %d times besides the bad hellos:\n%s", n, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "bad_client_hello") && !strings.Contains(line, "error=") {
			t.Errorf("log line without a reason: %s", line)
		}
	}
	// The edge still serves.
	if res, _ := get(t, e.client(t, "h2"), e.url("/")); res.StatusCode != 200 {
		t.Errorf("after bad hellos: %d", res.StatusCode)
	}
}
