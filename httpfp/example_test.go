package httpfp_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/maatproxy/maat/httpfp"
)

// Example serves one HTTP/1.1 connection the way the edge does: the
// connection is wrapped by NewConn, put in the connection's context, and
// the handler, wrapped by Handler, reads each request's fingerprint.
func Example() {
	client, server := net.Pipe()
	fc := httpfp.NewConn(server, httpfp.H1, httpfp.Config{})

	handler := httpfp.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fp, _ := httpfp.FromRequest(r)
		fmt.Fprintf(w, "%s %s", fp.HFP, strings.Join(fp.Names, ","))
	}))
	srv := &http.Server{
		Handler: handler,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return httpfp.NewContext(ctx, c.(*httpfp.Conn))
		},
	}
	go srv.Serve(&oneConn{c: fc, closed: make(chan struct{})})
	defer srv.Close()

	go fmt.Fprint(client, "GET / HTTP/1.1\r\nHost: example.org\r\nX-B: 2\r\nX-A: 1\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(client), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	body := make([]byte, resp.ContentLength)
	_, err = io.ReadFull(resp.Body, body)
	fmt.Println(string(body), err)
	// Output:
	// h104_bbd0f77b0c44 Host,X-B,X-A,Connection <nil>
}

// oneConn is a listener that yields one connection.
type oneConn struct {
	c      net.Conn
	once   sync.Once
	closed chan struct{}
}

func (l *oneConn) Accept() (net.Conn, error) {
	var c net.Conn
	l.once.Do(func() { c = l.c })
	if c != nil {
		return c, nil
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *oneConn) Close() error   { close(l.closed); return nil }
func (l *oneConn) Addr() net.Addr { return l.c.LocalAddr() }

// ExampleHFP computes the header fingerprint of a header list.
func ExampleHFP() {
	hfp, raw := httpfp.HFP(httpfp.H2, []string{":method", ":authority", ":scheme", ":path", "user-agent", "cookie", "accept"})
	fmt.Println(hfp)
	fmt.Println(raw)
	// Output:
	// h206_66be9bad73e8
	// :method,:authority,:scheme,:path,user-agent,accept
}

// ExampleLookupClient names the client whose HTTP/2 library sent a
// connection's preface: here Go's, under Chrome's pseudo-header order, as
// a parrot sends it.
func ExampleLookupClient() {
	c, ok := httpfp.LookupClient("2:0;4:4194304;5:16384;6:10485760|1073741824|0|m,a,s,p")
	fmt.Println(c.Family, c.Pseudo, ok)
	// Output: go a,m,p,s true
}
