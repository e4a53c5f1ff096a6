package edge

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// TestUnsentLimit: a client that stops reading gets no more than a few
// hundred KiB written into its socket before the edge's writes block (the
// kernel would let the buffer grow to megabytes), so the edge neither
// encrypts nor holds more for a reader that never comes.
func TestUnsentLimit(t *testing.T) {
	t.Parallel()
	for _, limited := range []bool{true, false} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		server, err := ln.Accept()
		ln.Close()
		if err != nil {
			t.Fatal(err)
		}
		if limited {
			limitUnsent(server)
		}
		// Write until a write stays blocked for half a second: the
		// client never reads.
		chunk := make([]byte, 64<<10)
		written := 0
		for written < 64<<20 {
			_ = server.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
			n, err := server.Write(chunk)
			written += n
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		client.Close()
		server.Close()
		t.Logf("limited %v: %d KiB written before the writes blocked", limited, written>>10)
		if limited && written > 1<<20 {
			t.Errorf("with the limit, %d KiB went into the socket of a client that never reads; want < 1024", written>>10)
		}
		if !limited && written <= 1<<20 {
			t.Logf("without the limit only %d KiB: this kernel does not grow the buffer, the test shows nothing here", written>>10)
		}
	}
}
