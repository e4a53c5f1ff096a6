//go:build !unix

package park

// parkable says whether idle connections can be parked here: not without
// a way to peek at a socket.
const parkable = false

func readable(uintptr) bool { return true }
