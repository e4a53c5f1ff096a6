package edge

import (
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestBindHint: a bind refused with EACCES on a port below 1024 (what a
// non-root edge meets on :443 and :80) says how to grant the privilege
// (setcap, systemd's AmbientCapabilities) and still wraps the error;
// other errors and other ports are left as they are.
func TestBindHint(t *testing.T) {
	t.Parallel()
	refused := func(op string) error {
		return &net.OpError{Op: "listen", Net: op, Err: os.NewSyscallError("bind", syscall.EACCES)}
	}
	inUse := &net.OpError{Op: "listen", Net: "tcp", Err: os.NewSyscallError("bind", syscall.EADDRINUSE)}
	for _, tt := range []struct {
		name, addr string
		err        error
		hint       bool
	}{
		{"https refused", ":443", refused("tcp"), true},
		{"http refused on an address", "192.0.2.1:80", refused("tcp"), true},
		{"http3 refused", "[::]:443", refused("udp"), true},
		{"a high port refused (not a privilege)", ":8443", refused("tcp"), false},
		{"in use", ":443", inUse, false},
		{"no error", ":443", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := bindHint(tt.addr, tt.err)
			if !errors.Is(got, tt.err) || (tt.err == nil) != (got == nil) {
				t.Fatalf("bindHint(%q, %v) = %v: does not wrap the error", tt.addr, tt.err, got)
			}
			if got == nil {
				return
			}
			hinted := strings.Contains(got.Error(), "setcap cap_net_bind_service=+ep") && strings.Contains(got.Error(), "AmbientCapabilities=CAP_NET_BIND_SERVICE")
			if hinted != tt.hint {
				t.Errorf("bindHint(%q, %v) = %q; hint %v, want %v", tt.addr, tt.err, got, hinted, tt.hint)
			}
		})
	}
}
