//go:build !unix

package static

// openFlags are added to every open; none are needed outside Unix.
const openFlags = 0
