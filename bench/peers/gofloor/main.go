// Command gofloor is the floor that bench/peers measures the edge against:
// net/http's own TLS server (HTTP/1.1 and HTTP/2) doing the least a
// reverse proxy does, and nothing else. Each request is written to an
// upstream connection taken from an unbounded pool, its answer is parsed
// by http.ReadResponse and copied to the client. No hop-by-hop rules, no
// limits, no timeouts, no log: it is not a proxy anyone should run, only
// what any front built on net/http pays per request before it does a
// thing of its own.
//
// Usage: gofloor -listen 127.0.0.1:8443 -upstream 127.0.0.1:8080 -cert cert.pem -key key.pem
package main

import (
	"bufio"
	"flag"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
)

// conn is an upstream connection.
type conn struct {
	nc net.Conn
	br *bufio.Reader
	bw *bufio.Writer
}

// pool keeps the idle upstream connections.
type pool struct {
	addr string
	mu   sync.Mutex
	idle []*conn
}

func (p *pool) get() (*conn, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	nc, err := net.Dial("tcp", p.addr)
	if err != nil {
		return nil, err
	}
	return &conn{nc: nc, br: bufio.NewReaderSize(nc, 32<<10), bw: bufio.NewWriterSize(nc, 4<<10)}, nil
}

func (p *pool) put(c *conn) {
	p.mu.Lock()
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

func (p *pool) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := p.get()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	c.bw.WriteString(r.Method + " " + r.URL.RequestURI() + " HTTP/1.1\r\nHost: " + r.Host + "\r\n")
	for k, vs := range r.Header {
		for _, v := range vs {
			c.bw.WriteString(k + ": " + v + "\r\n")
		}
	}
	c.bw.WriteString("X-Forwarded-For: " + r.RemoteAddr + "\r\n\r\n")
	if err := c.bw.Flush(); err != nil {
		c.nc.Close()
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	res, err := http.ReadResponse(c.br, r)
	if err != nil {
		c.nc.Close()
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	h := w.Header()
	for k, vs := range res.Header {
		if k != "Connection" && k != "Keep-Alive" {
			h[k] = vs
		}
	}
	w.WriteHeader(res.StatusCode)
	_, err = io.Copy(w, res.Body)
	res.Body.Close()
	if err != nil || res.Close {
		c.nc.Close()
		return
	}
	p.put(c)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8443", "address to serve TLS on")
	upstream := flag.String("upstream", "127.0.0.1:8080", "plain-HTTP upstream address")
	cert := flag.String("cert", "cert.pem", "certificate file")
	key := flag.String("key", "key.pem", "key file")
	flag.Parse()
	srv := &http.Server{Addr: *listen, Handler: &pool{addr: *upstream}}
	log.Fatal(srv.ListenAndServeTLS(*cert, *key))
}
