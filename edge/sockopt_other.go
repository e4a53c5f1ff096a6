//go:build !linux

package edge

import "net"

// limitUnsent does nothing where TCP_NOTSENT_LOWAT is missing.
func limitUnsent(net.Conn) {}
