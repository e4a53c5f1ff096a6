package compress

import (
	"net/http"
	"strconv"
	"strings"
)

// state is where a response stands.
type state uint8

const (
	pending     state = iota // deciding: bytes are held in buf
	passthrough              // the response goes out as the handler wrote it
	compressing              // the response goes through enc
)

// sniffLen is how many bytes http.DetectContentType looks at.
const sniffLen = 512

// responseWriter holds a response back until it knows whether to compress
// it, then either passes it through or sends it through an encoder.
type responseWriter struct {
	http.ResponseWriter
	c      *Compressor
	codec  *codec // the negotiated encoding; nil if none
	enc    *encoder
	status int // set by WriteHeader or the first Write; 0 before
	state  state
	buf    []byte
}

// verdict is what decide concluded.
type verdict struct {
	decided  bool
	compress bool
	vary     bool   // the response could have been compressed for another request
	sniffed  string // the Content-Type sniffed, to set when compressing
}

// decide looks at the status, the headers and what was written: n is the
// number of bytes written so far (held or about to be), sniff the first of
// them when the Content-Type may be sniffed now, flush whether the handler
// flushes, final whether it returned.
func (w *responseWriter) decide(n int, sniff []byte, flush, final bool) verdict {
	pass := verdict{decided: true}
	if !compressibleStatus(w.status) {
		return pass
	}
	h := w.Header()
	if headerValue(h, "Content-Encoding") != "" || noTransform(h) {
		return pass
	}
	var v verdict
	if ct, ok := h["Content-Type"]; ok {
		if len(ct) == 0 || !matchType(w.c.types, ct[0]) {
			return pass // an empty Content-Type asks net/http not to sniff
		}
	} else {
		switch {
		case len(sniff) > 0:
			v.sniffed = http.DetectContentType(sniff)
			if !matchType(w.c.types, v.sniffed) {
				return pass
			}
		case flush || final:
			return pass // nothing to tell the type from
		default:
			return verdict{}
		}
	}
	v.vary = true
	if w.codec == nil {
		v.decided = true
		return v
	}
	size := int64(-1)
	if cl := headerValue(h, "Content-Length"); cl != "" {
		if s, err := strconv.ParseInt(cl, 10, 64); err == nil && s >= 0 {
			size = s
		}
	}
	switch {
	case size >= 0:
		v.decided, v.compress = true, size >= int64(w.c.minSize)
	case final:
		v.decided, v.compress = true, n >= w.c.minSize
	case flush || n >= w.c.minSize:
		v.decided, v.compress = true, true
	}
	return v
}

// compressibleStatus reports whether a response with this status has a body
// that may be compressed.
func compressibleStatus(code int) bool {
	switch {
	case code < 200, code == http.StatusNoContent, code == http.StatusResetContent,
		code == http.StatusPartialContent, code == http.StatusNotModified:
		return false
	}
	return true
}

// noTransform reports whether Cache-Control forbids changing the content.
func noTransform(h http.Header) bool {
	for _, v := range h["Cache-Control"] {
		for v != "" {
			var d string
			d, v, _ = strings.Cut(v, ",")
			if strings.EqualFold(strings.TrimSpace(d), "no-transform") {
				return true
			}
		}
	}
	return false
}

// headerValue is h.Get for a key in canonical form, without canonicalizing
// it again: the keys here are constants.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// addVary adds Accept-Encoding to the Vary header unless it is there.
func addVary(h http.Header) {
	for _, v := range h["Vary"] {
		for v != "" {
			var f string
			f, v, _ = strings.Cut(v, ",")
			f = strings.TrimSpace(f)
			if f == "*" || strings.EqualFold(f, "Accept-Encoding") {
				return
			}
		}
	}
	if v := h["Vary"]; len(v) > 0 {
		h["Vary"] = append(v, "Accept-Encoding")
		return
	}
	h["Vary"] = varyAcceptEncoding[:1:1]
}

// varyAcceptEncoding is the Vary of most responses, shared: its capacity
// is its length, so a handler that adds to it copies it first.
var varyAcceptEncoding = []string{"Accept-Encoding"}

// commit applies v, sends the header and the bytes held back.
func (w *responseWriter) commit(v verdict) error {
	h := w.Header()
	if v.vary {
		addVary(h)
	}
	if v.compress {
		e, err := w.codec.get(w.ResponseWriter)
		if err == nil {
			w.enc = e
			if v.sniffed != "" {
				h["Content-Type"] = []string{v.sniffed}
			}
			delete(h, "Content-Length")
			delete(h, "Accept-Ranges")
			h["Content-Encoding"] = []string{w.codec.name}
			if etag := headerValue(h, "Etag"); etag != "" && !strings.HasPrefix(etag, "W/") {
				h["Etag"] = []string{"W/" + etag}
			}
		}
	}
	if w.status != 0 {
		w.ResponseWriter.WriteHeader(w.status)
	}
	held := w.buf
	w.buf = w.buf[:0]
	if w.enc != nil {
		w.state = compressing
		if len(held) > 0 {
			_, err := w.enc.w.Write(held)
			return err
		}
		return nil
	}
	w.state = passthrough
	if len(held) > 0 {
		_, err := w.ResponseWriter.Write(held)
		return err
	}
	return nil
}

// WriteHeader records the status; it goes out once the response is decided.
// Informational (1xx) responses other than 101 pass through at once.
func (w *responseWriter) WriteHeader(code int) {
	if w.state != pending || code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	if w.status != 0 {
		return // superfluous, as net/http would ignore it
	}
	w.status = code
	if v := w.decide(0, nil, false, false); v.decided {
		w.commit(v)
	}
}

// Write holds p back while the response is undecided and shorter than
// MinSize, and otherwise writes it through the encoder or as it is.
func (w *responseWriter) Write(p []byte) (int, error) {
	switch w.state {
	case compressing:
		return w.enc.w.Write(p)
	case passthrough:
		return w.ResponseWriter.Write(p)
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n := len(w.buf) + len(p)
	var sniff []byte
	if n >= w.c.minSize || w.codec == nil {
		sniff = w.sniff(p)
	}
	v := w.decide(n, sniff, false, false)
	if !v.decided {
		w.buf = append(w.buf, p...)
		return len(p), nil
	}
	if err := w.commit(v); err != nil {
		return 0, err
	}
	return w.Write(p)
}

// sniff returns the first sniffLen bytes of what was held and p.
func (w *responseWriter) sniff(p []byte) []byte {
	if len(w.buf) == 0 {
		return p[:min(len(p), sniffLen)]
	}
	if len(w.buf) >= sniffLen {
		return w.buf[:sniffLen]
	}
	// Append to the held bytes, beyond their length: the copy is only
	// looked at, and w.buf keeps its length.
	return append(w.buf, p[:min(len(p), sniffLen-len(w.buf))]...)
}

// FlushError decides the response if it is undecided (a flushed response
// is a stream: compressed if it qualifies, whatever its size), flushes the
// encoder and then the connection.
func (w *responseWriter) FlushError() error {
	if w.state == pending {
		if w.status == 0 {
			w.status = http.StatusOK
		}
		if err := w.commit(w.decide(len(w.buf), w.sniffHeld(), true, false)); err != nil {
			return err
		}
	}
	if w.state == compressing {
		if err := w.enc.w.Flush(); err != nil {
			return err
		}
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Flush is FlushError for handlers that use http.Flusher.
func (w *responseWriter) Flush() { _ = w.FlushError() }

// Unwrap returns the underlying ResponseWriter, for http.ResponseController.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *responseWriter) sniffHeld() []byte { return w.buf[:min(len(w.buf), sniffLen)] }

// finish ends the response after the handler returned.
func (w *responseWriter) finish() {
	switch w.state {
	case pending:
		if w.status == 0 && len(w.buf) == 0 {
			return // nothing written: net/http sends an empty 200
		}
		if w.status == 0 {
			w.status = http.StatusOK
		}
		if w.commit(w.decide(len(w.buf), w.sniffHeld(), false, true)) != nil || w.state != compressing {
			return
		}
		fallthrough
	case compressing:
		_ = w.enc.w.Close() // a failed write shows the client a cut response
		w.codec.put(w.enc)
		w.enc = nil
	}
}
