package httpfp

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// h1State is where the HTTP/1 tap stands in the byte stream (RFC 9112).
type h1State uint8

const (
	h1LineStart    h1State = iota // before a request line; empty lines skipped
	h1RequestLine                 // in the request line
	h1FieldStart                  // at the start of a field line
	h1FieldStartLF                // after CR at the start of a field line
	h1Name                        // in a field name
	h1Value                       // in a field value (skipped unless captured)
	h1Body                        // in a Content-Length body
	h1ChunkSize                   // in a chunk-size
	h1ChunkExt                    // in chunk extensions, up to LF
	h1ChunkData                   // in chunk data
	h1ChunkCR                     // after chunk data, before CRLF
	h1ChunkLF                     // after chunk data and CR
	h1Trailer                     // at the start of a trailer line
	h1TrailerLine                 // in a trailer line
	h1TrailerLF                   // after CR at the start of a trailer line
	h1Done                        // after an Upgrade or CONNECT: not HTTP/1 any more
)

// fieldKind says what the tap keeps of a field's value.
type fieldKind uint8

const (
	fieldOther fieldKind = iota
	fieldContentLength
	fieldTransferEncoding
	fieldUpgrade
	fieldCookie
	fieldLanguage
)

// maxFramingValue bounds a captured Content-Length or Transfer-Encoding.
const maxFramingValue = 64

// maxChunkLine bounds a chunk-size line, as net/http's chunked reader does.
const maxChunkLine = 4096

// h1Tap follows HTTP/1 messages on a connection and captures each request's
// header names.
type h1Tap struct {
	c    *Conn
	ja4h bool
	max  int // header bytes allowed per message, request line included

	state h1State
	size  int    // header bytes of the current message
	buf   []byte // method, target, then the names, back to back
	mEnd  int    // end of the method in buf
	tEnd  int    // end of the target in buf (it starts at mEnd)
	ends  []int  // end of each name in buf
	ver   [2]byte
	kind  fieldKind
	val   []byte // the captured value of the current field

	contentLength int64 // -1 if absent
	chunked       bool
	lengthSeen    bool // a Content-Length field, even one not read yet
	codingSeen    bool // a Transfer-Encoding field, in any version
	upgrade       bool
	cookies       []string
	lang          string
	langSeen      bool

	remain    uint64 // body or chunk bytes left
	chunkLine int
	digits    int

	memo *memo // nil until a request needs it, and after Conn.Rest

	blank bool // bytes of empty lines read since the last request ended
}

func newH1Tap(c *Conn, cfg Config) *h1Tap {
	return &h1Tap{c: c, ja4h: cfg.JA4H, max: cfg.maxHeaderBytes() + 4096}
}

// feed consumes p, the next bytes of the connection.
func (t *h1Tap) feed(p []byte) error {
	for len(p) > 0 {
		var err error
		if p, err = t.step(p); err != nil {
			return err
		}
	}
	return nil
}

// step consumes a prefix of p and returns the rest.
func (t *h1Tap) step(p []byte) ([]byte, error) {
	switch t.state {
	case h1Done:
		return nil, nil
	case h1LineStart:
		if p[0] == '\r' || p[0] == '\n' {
			t.blank = true
			return p[1:], nil
		}
		t.resetMessage()
		t.state = h1RequestLine
		return p, nil
	case h1RequestLine:
		i := bytes.IndexByte(p, '\n')
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		if err := t.grow(len(seg) + 1); err != nil {
			return nil, err
		}
		t.buf = append(t.buf, seg...)
		if i < 0 {
			return nil, nil
		}
		if err := t.requestLine(); err != nil {
			return nil, err
		}
		t.state = h1FieldStart
		return p[i+1:], nil
	case h1FieldStart:
		if err := t.grow(1); err != nil {
			return nil, err
		}
		switch p[0] {
		case ' ', '\t': // obs-fold: the value goes on
			t.state = h1Value
			if t.kind != fieldOther {
				t.val = append(t.val, ' ')
			}
			return p[1:], nil
		}
		if err := t.endField(); err != nil {
			return nil, err
		}
		switch p[0] {
		case '\r':
			t.state = h1FieldStartLF
			return p[1:], nil
		case '\n':
			return p[1:], t.endHeader()
		}
		t.state = h1Name
		return p, nil
	case h1FieldStartLF:
		if p[0] != '\n' {
			return nil, fmt.Errorf("%w: CR without LF after header", ErrMalformed)
		}
		return p[1:], t.endHeader()
	case h1Name:
		i := bytes.IndexByte(p, ':')
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		if bytes.IndexByte(seg, '\n') >= 0 {
			return nil, fmt.Errorf("%w: header line without colon", ErrMalformed)
		}
		if err := t.grow(len(seg)); err != nil {
			return nil, err
		}
		t.buf = append(t.buf, seg...)
		if i < 0 {
			return nil, nil
		}
		t.ends = append(t.ends, len(t.buf))
		t.kind = t.classify(t.buf[t.nameStart():])
		t.lengthSeen = t.lengthSeen || t.kind == fieldContentLength
		t.codingSeen = t.codingSeen || t.kind == fieldTransferEncoding
		t.state = h1Value
		return p[i+1:], nil
	case h1Value:
		i := bytes.IndexByte(p, '\n')
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		if err := t.grow(len(seg)); err != nil {
			return nil, err
		}
		if t.kind != fieldOther && t.kind != fieldUpgrade {
			t.val = append(t.val, seg...)
		}
		if i < 0 {
			return nil, nil
		}
		t.state = h1FieldStart
		return p[i+1:], nil
	case h1Body, h1ChunkData:
		n := uint64(len(p))
		if n > t.remain {
			n = t.remain
		}
		t.remain -= n
		if t.remain == 0 {
			if t.state == h1Body {
				t.state = h1LineStart
			} else {
				t.state = h1ChunkCR
			}
		}
		return p[n:], nil
	}
	return t.stepChunked(p)
}

// stepChunked follows the chunked transfer coding (RFC 9112, section 7.1).
func (t *h1Tap) stepChunked(p []byte) ([]byte, error) {
	c := p[0]
	switch t.state {
	case h1ChunkSize:
		t.chunkLine++
		switch {
		case c == '\n':
			return p[1:], t.endChunkSize()
		case c == ';' || c == ' ' || c == '\t' || c == '\r':
			t.state = h1ChunkExt
		default:
			v, ok := unhex(c)
			if !ok || t.digits == 16 {
				return nil, fmt.Errorf("%w: bad chunk size", ErrMalformed)
			}
			t.remain = t.remain<<4 | uint64(v)
			t.digits++
		}
		return p[1:], nil
	case h1ChunkExt:
		i := bytes.IndexByte(p, '\n')
		n := len(p)
		if i >= 0 {
			n = i
		}
		if t.chunkLine += n; t.chunkLine > maxChunkLine {
			return nil, fmt.Errorf("%w: chunk line too long", ErrMalformed)
		}
		if i < 0 {
			return nil, nil
		}
		return p[i+1:], t.endChunkSize()
	case h1ChunkCR, h1ChunkLF:
		if c == '\r' && t.state == h1ChunkCR {
			t.state = h1ChunkLF
			return p[1:], nil
		}
		if c != '\n' {
			return nil, fmt.Errorf("%w: chunk data not followed by CRLF", ErrMalformed)
		}
		t.state, t.remain, t.digits, t.chunkLine = h1ChunkSize, 0, 0, 0
		return p[1:], nil
	case h1Trailer:
		switch c {
		case '\r':
			t.state = h1TrailerLF
		case '\n':
			t.state = h1LineStart
		default:
			t.state = h1TrailerLine
			return p, nil
		}
		return p[1:], nil
	case h1TrailerLF:
		if c != '\n' {
			return nil, fmt.Errorf("%w: CR without LF after trailer", ErrMalformed)
		}
		t.state = h1LineStart
		return p[1:], nil
	case h1TrailerLine:
		i := bytes.IndexByte(p, '\n')
		n := len(p)
		if i >= 0 {
			n = i
		}
		if err := t.grow(n); err != nil {
			return nil, err
		}
		if i < 0 {
			return nil, nil
		}
		t.state = h1Trailer
		return p[i+1:], nil
	}
	return nil, fmt.Errorf("%w: tap state %d", ErrMalformed, t.state)
}

func (t *h1Tap) endChunkSize() error {
	if t.digits == 0 {
		return fmt.Errorf("%w: empty chunk size", ErrMalformed)
	}
	if t.remain == 0 {
		t.state = h1Trailer
		return nil
	}
	t.state = h1ChunkData
	return nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// grow counts n more header bytes against the limit.
func (t *h1Tap) grow(n int) error {
	t.size += n
	if t.size > t.max {
		return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, t.max)
	}
	return nil
}

func (t *h1Tap) nameStart() int {
	if len(t.ends) > 1 {
		return t.ends[len(t.ends)-2]
	}
	return t.tEnd
}

func (t *h1Tap) resetMessage() {
	t.buf, t.ends, t.val = t.buf[:0], t.ends[:0], t.val[:0]
	t.size, t.kind = 0, fieldOther
	t.contentLength, t.chunked, t.upgrade = -1, false, false
	t.lengthSeen, t.codingSeen = false, false
	t.cookies, t.lang, t.langSeen = nil, "", false
	t.blank = false
}

// requestLine splits the request line in buf the way net/http does
// (method SP request-target SP HTTP-version) and keeps method and target.
func (t *h1Tap) requestLine() error {
	line := bytes.TrimSuffix(t.buf, []byte("\r"))
	method, rest, ok1 := bytes.Cut(line, []byte(" "))
	target, version, ok2 := bytes.Cut(rest, []byte(" "))
	if !ok1 || !ok2 || len(method) == 0 || len(version) != len("HTTP/1.1") ||
		!bytes.HasPrefix(version, []byte("HTTP/")) || version[6] != '.' {
		return fmt.Errorf("%w: bad request line", ErrMalformed)
	}
	t.ver = [2]byte{version[5], version[7]}
	t.mEnd = len(method)
	t.tEnd = t.mEnd + copy(t.buf[t.mEnd:], target) // drop the space between them
	t.buf = t.buf[:t.tEnd]
	return nil
}

// classify says which values of a field the tap needs.
func (t *h1Tap) classify(name []byte) fieldKind {
	switch len(name) {
	case len("cookie"):
		if t.ja4h && strings.EqualFold(string(name), "cookie") {
			return fieldCookie
		}
	case len("upgrade"):
		if strings.EqualFold(string(name), "upgrade") {
			return fieldUpgrade
		}
	case len("content-length"):
		if strings.EqualFold(string(name), "content-length") {
			return fieldContentLength
		}
	case len("accept-language"):
		if t.ja4h && !t.langSeen && strings.EqualFold(string(name), "accept-language") {
			return fieldLanguage
		}
	case len("transfer-encoding"):
		if strings.EqualFold(string(name), "transfer-encoding") {
			return fieldTransferEncoding
		}
	}
	return fieldOther
}

// endField acts on the field just read, once no continuation line follows.
func (t *h1Tap) endField() error {
	kind, val := t.kind, strings.TrimSpace(string(t.val))
	t.kind, t.val = fieldOther, t.val[:0]
	switch kind {
	case fieldContentLength:
		n, err := strconv.ParseUint(val, 10, 63)
		if err != nil || len(val) > maxFramingValue ||
			(t.contentLength >= 0 && uint64(t.contentLength) != n) {
			return fmt.Errorf("%w: bad Content-Length", ErrMalformed)
		}
		t.contentLength = int64(n)
	case fieldTransferEncoding:
		if t.ver[0] < '1' || (t.ver[0] == '1' && t.ver[1] < '1') {
			return nil // net/http ignores it before HTTP/1.1
		}
		if !strings.EqualFold(val, "chunked") || t.chunked {
			return fmt.Errorf("%w: unsupported Transfer-Encoding", ErrMalformed)
		}
		t.chunked = true
	case fieldUpgrade:
		t.upgrade = true
	case fieldCookie:
		t.cookies = append(t.cookies, val)
	case fieldLanguage:
		t.lang, t.langSeen = val, true
	}
	return nil
}

// endHeader queues the request's fingerprint and follows its body.
func (t *h1Tap) endHeader() error {
	p := &pending{}
	mu := string(t.buf[:t.tEnd])
	p.method, p.uri = mu[:t.mEnd], mu[t.mEnd:]
	if t.memo == nil {
		t.memo = new(memo)
	}
	p.fp.Names, p.fp.HFP, p.fp.HFPR = t.memo.getJoined(H1, t.buf[t.tEnd:], t.ends, t.tEnd)
	p.fp.Ordered = true
	p.fp.AmbiguousLength = t.codingSeen && (t.lengthSeen || t.ver[0] < '1' || (t.ver[0] == '1' && t.ver[1] < '1'))
	if t.ja4h {
		j := ja4hInput{method: p.method, version: string(t.ver[:]), names: p.fp.Names, cookies: t.cookies, lang: t.lang}
		p.fp.JA4H, p.fp.JA4HR = t.memo.ja4h(&j)
	}
	t.c.push(p)

	switch {
	case t.upgrade || p.method == "CONNECT":
		t.state = h1Done
	case t.chunked:
		t.state, t.remain, t.digits, t.chunkLine = h1ChunkSize, 0, 0, 0
	case t.contentLength > 0:
		t.state, t.remain = h1Body, uint64(t.contentLength)
	default:
		t.state = h1LineStart
	}
	return nil
}
