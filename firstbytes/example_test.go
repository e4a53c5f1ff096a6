package firstbytes_test

import (
	"fmt"
	"net"
	"time"

	"github.com/maatproxy/maat/firstbytes"
)

// A connection type that reads a header first, under its own deadline,
// and leaves its owner's read deadline as the owner set it.
type headerConn struct {
	net.Conn
	ddl firstbytes.Deadline
}

func (c *headerConn) SetReadDeadline(t time.Time) error { return c.ddl.SetReadDeadline(c.Conn, t) }

func (c *headerConn) readHeader(p []byte) (int, error) {
	c.ddl.Begin(c.Conn, time.Now().Add(10*time.Second))
	defer c.ddl.End(c.Conn)
	return c.Conn.Read(p)
}

func Example() {
	client, server := net.Pipe()
	defer client.Close()
	c := &headerConn{Conn: server}
	defer c.Close()
	go func() { _, _ = client.Write([]byte("PROXY")) }()
	buf := make([]byte, 5)
	n, err := c.readHeader(buf)
	fmt.Println(string(buf[:n]), err)
	// Output: PROXY <nil>
}
