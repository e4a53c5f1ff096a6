package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// testServers returns a plain and a TLS httptest server of h, each with
// the Options that reach it.
func testServers(t *testing.T, h http.Handler) map[string]*httptest.Server {
	t.Helper()
	plain, secure := httptest.NewServer(h), httptest.NewTLSServer(h)
	t.Cleanup(plain.Close)
	t.Cleanup(secure.Close)
	return map[string]*httptest.Server{"plain": plain, "tls": secure}
}

// testTLS is the TLS configuration of an httptest TLS server's address.
func testTLS(srv *httptest.Server) map[string]*tls.Config {
	if srv.TLS == nil {
		return nil
	}
	return map[string]*tls.Config{srv.Listener.Addr().String(): {InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}}
}

// TestTransportBodyCloseEndsRead pins a behaviour of net/http the package
// relies on without its documentation saying so: closing an
// http.Transport answer's body ends a Read of it under way on another
// goroutine. A spill's drainer reads an answer's body while the handler
// may close it; the drainer must not be left blocked in the Read.
func TestTransportBodyCloseEndsRead(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	srvs := testServers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		_, _ = io.WriteString(w, "first")
		w.(http.Flusher).Flush()
		select { // the rest never comes while the test runs
		case <-done:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(done) }) // runs first: the handlers return before the servers close
	for name, srv := range srvs {
		t.Run(name, func(t *testing.T) {
			tr := NewHTTPTransport(Options{Conns: 4, Streams: 4, TLS: testTLS(srv)})
			defer tr.CloseIdleConnections()
			req := httptest.NewRequest(http.MethodPost, srv.URL+"/", strings.NewReader("x"))
			req.RequestURI = ""
			res, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			var p [5]byte
			if _, err := io.ReadFull(res.Body, p[:]); err != nil {
				t.Fatal(err)
			}
			read := make(chan error, 1)
			go func() {
				_, err := res.Body.Read(p[:]) // blocks: the rest never comes
				read <- err
			}()
			// However far the Read got, Close must end it.
			_ = res.Body.Close()
			select {
			case err := <-read:
				if err == nil {
					t.Error("the Read under way returned no error after Close")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Close did not end the Read under way")
			}
		})
	}
}

// TestGotConnIsTheDialedConn pins a behaviour of net/http the package
// relies on without its documentation saying so: the ClientTrace's GotConn
// reports the very net.Conn the Transport's DialContext or DialTLSContext
// returned (the connLimit's limitedConn), through which a stream's
// connection leaves the count of Options.Conns.
func TestGotConnIsTheDialedConn(t *testing.T) {
	t.Parallel()
	for name, srv := range testServers(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := Options{Conns: 4, Streams: 4, ConnectTimeout: 5 * time.Second, TLS: testTLS(srv)}
			tr := newTransport(o, newConnLimit(o.Conns, o.ConnectTimeout))
			defer tr.CloseIdleConnections()
			var got atomic.Value
			req := httptest.NewRequest(http.MethodPost, srv.URL+"/", strings.NewReader("x"))
			req = req.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
				GotConn: func(i httptrace.GotConnInfo) { got.Store(i.Conn) }}))
			req.RequestURI = ""
			res, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if _, ok := got.Load().(*limitedConn); !ok {
				t.Errorf("GotConn reported a %T, want the dialer's *limitedConn", got.Load())
			}
		})
	}
}

// TestRoundTripFailover: an address that cannot be reached is paused and
// the request, not sent, is tried on the next one, at the same path; the
// Route says which address answered.
func TestRoundTripFailover(t *testing.T) {
	t.Parallel()
	var path atomic.Value
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path.Store(r.URL.RequestURI())
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(live.Close)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // its address refuses connections now
	tr := newTestTransport(t, Options{})
	pool := newTestPool(t, tr, dead.URL+"/base", live.URL+"/base")
	route := &Route{Pool: pool, Client: netip.MustParseAddr("192.0.2.1")}
	in, _ := url.Parse("/x?q=1")
	req := httptest.NewRequest(http.MethodGet, "/x?q=1", nil).WithContext(WithRoute(context.Background(), route))
	req.RequestURI = ""
	req.URL = route.Pick(in, time.Now())
	if route.Addr() != strings.TrimPrefix(dead.URL, "http://") {
		t.Fatalf("the first pick is %s, want the dead address first (round robin from the start)", route.Addr())
	}
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if got := path.Load(); got != "/base/x?q=1" {
		t.Errorf("the live address got %v, want /base/x?q=1", got)
	}
	if route.Addr() != strings.TrimPrefix(live.URL, "http://") {
		t.Errorf("the Route says %s answered, want the live address", route.Addr())
	}
	if s := pool.State(); !s[0].Down || s[1].Down {
		t.Errorf("state %+v, want the dead address paused, the live one not", s)
	}
}

// TestRoundTripWithoutRoute: a request without a picked Route is refused,
// unsent.
func TestRoundTripWithoutRoute(t *testing.T) {
	t.Parallel()
	tr := newTestTransport(t, Options{})
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:9/", nil)
	req.RequestURI = ""
	if _, err := tr.RoundTrip(req); !errors.Is(err, errNoRoute) {
		t.Errorf("%v, want errNoRoute", err)
	}
}
