package edge

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/maatproxy/maat/fplog"
)

// startHTTP serves port 80: ACME HTTP-01 answers, otherwise a redirect to
// the same URL over https.
func (s *Server) startHTTP() error {
	cfg := s.base
	if cfg.Listen.HTTP == "" {
		return nil
	}
	ln, err := s.listenTCP(cfg.Listen.HTTP)
	if err != nil {
		return fmt.Errorf("edge: listen http: %w", err)
	}
	s.track(ln)
	s.addrs.HTTP = ln.Addr().String()
	s.web = &http.Server{
		Handler:           s.certs.HTTPHandler(http.HandlerFunc(s.redirectHTTPS)),
		ReadHeaderTimeout: cfg.Timeouts.ReadHeader.D(),
		IdleTimeout:       cfg.Timeouts.Idle.D(),
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.group.Go("http", func() error { return serveErr(s.web.Serve(ln)) })
	return nil
}

// redirectHTTPS answers port 80: a redirect to the same URL over https.
func (s *Server) redirectHTTPS(w http.ResponseWriter, r *http.Request) {
	host := hostOnly(r.Host)
	if host == "" || s.handler.Load().sites.lookup(host) == nil {
		s.refuseHTTP(w, r, http.StatusMisdirectedRequest, reasonUnknownSite)
		return
	}
	status := http.StatusMovedPermanently
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		status = http.StatusPermanentRedirect // keeps the method and body
	}
	loc, ok := httpsURL(s.env.HTTPSPort, host, r.URL)
	if !ok {
		s.refuseHTTP(w, r, http.StatusBadRequest, reasonBadHost)
		return
	}
	writeRedirect(w, loc, status)
}

// refuseHTTP answers a request port 80 does not redirect as the Handler
// answers those it refuses: a plain error page naming the reason and the
// request's ID, and a fingerprint log line.
func (s *Server) refuseHTTP(w http.ResponseWriter, r *http.Request, status int, reason string) {
	h := s.handler.Load()
	st := h.newState(r)
	st.action = fplog.ActionDeny
	st.recorder.ResponseWriter = w
	plainError(&st.recorder, st, status, reason)
	h.finish(st, &st.recorder, r)
}

// answerPlainHTTP answers a plain-HTTP request sent to the TLS port: a
// redirect to the https URL for GET and HEAD, otherwise a 400 that says what
// happened. It reads at most one bounded request head.
func (s *Server) answerPlainHTTP(c net.Conn, first []byte) {
	defer c.Close()
	start := time.Now()
	_ = c.SetDeadline(start.Add(5 * time.Second))
	br := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(first), io.LimitReader(c, 16<<10)), 4096)
	req, err := http.ReadRequest(br)
	if err == nil && (req.Method == http.MethodGet || req.Method == http.MethodHead) {
		if host := hostOnly(req.Host); host != "" && s.handler.Load().sites.lookup(host) != nil {
			if loc, ok := httpsURL(s.env.HTTPSPort, host, req.URL); ok {
				writePlain(c, "301 Moved Permanently", "Location: "+loc+"\r\n", "This port speaks HTTPS. Try instead: "+loc+"\n")
				return
			}
		}
	}
	// Refused, with a fingerprint log line as the Handler writes for the
	// requests it refuses (of what could be read).
	h := s.handler.Load()
	st := &reqState{start: start, id: h.env.ids.next(), peer: addrOf(c.RemoteAddr()), action: fplog.ActionDeny, reason: reasonPlainHTTP}
	st.client = st.peer
	body := plainBody(http.StatusBadRequest, reasonPlainHTTP, st.id)
	writePlain(c, "400 Bad Request", "X-Request-Id: "+st.id+"\r\n", body)
	if err != nil {
		req = &http.Request{URL: &url.URL{}, Header: http.Header{}, ProtoMajor: 1}
	}
	h.finish(st, &recorder{status: http.StatusBadRequest, bytes: int64(len(body))}, req)
}

// writePlain writes a whole HTTP/1.1 response with a text body and closes
// the exchange.
func writePlain(c net.Conn, status, extra, body string) {
	_, _ = io.WriteString(c, "HTTP/1.1 "+status+"\r\n"+extra+
		"Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: "+
		strconv.Itoa(len(body))+"\r\n\r\n"+body)
}
