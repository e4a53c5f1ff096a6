//go:build unix

package edge

// parkable says whether idle connections can be parked here: a parked
// connection's wait needs readable.
const parkable = true

// readable reports whether the socket fd has bytes to read, has been
// closed by its peer, or failed: a non-blocking peek.
func readable(fd uintptr) bool {
	var b [1]byte
	_, empty, _ := peekSocket(fd, b[:])
	return !empty
}
