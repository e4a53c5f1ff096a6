package fplog

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"time"
)

// Access log formats, for AccessConfig.Format.
const (
	// FormatCombined is the NCSA Combined Log Format, as Apache's and
	// nginx's "combined" write it.
	FormatCombined = "combined"
	// FormatJSON is one JSON object per line.
	FormatJSON = "json"
)

// combinedTimeLayout is the time of a Combined Log Format line (Apache's %t).
const combinedTimeLayout = "02/Jan/2006:15:04:05 -0700"

// AccessConfig configures an AccessWriter. Only Path (or Output) is
// required. The fields it shares with Config mean the same.
type AccessConfig struct {
	// Path is the log file, or "-" for the standard output. The file is
	// opened for appending and created with mode 0640; its directory must
	// exist. Ignored if Output is set.
	Path string
	// Output, if set, receives the lines instead of Path, without rotation.
	// The AccessWriter does not close it.
	Output io.Writer
	// Format is FormatCombined or FormatJSON. If empty, FormatCombined is
	// used.
	Format string
	// MaxSizeMB is the size in MiB at which the file is rotated and
	// compressed. If zero, DefaultMaxSizeMB is used.
	MaxSizeMB int
	// MaxFiles is the number of rotated files kept. If zero,
	// DefaultMaxFiles is used.
	MaxFiles int
	// QueueSize is the number of records waiting to be written. If zero,
	// DefaultQueueSize is used.
	QueueSize int
	// ClientIP is how the client address is written: ClientIPFull,
	// ClientIPPrefix, ClientIPHash or ClientIPNone. If empty, ClientIPFull
	// is used. See the package documentation for what GoAccess and fail2ban
	// make of each.
	ClientIP string
	// HashKey is the secret of ClientIPHash, at least MinHashKeyBytes long.
	HashKey []byte
}

// Validate reports every problem of the configuration at once.
func (c *AccessConfig) Validate() error {
	errs := c.settings().problems()
	switch c.Format {
	case "", FormatCombined, FormatJSON:
	default:
		errs = append(errs, fmt.Errorf("%w: format %q is not combined or json", ErrConfig, c.Format))
	}
	return errors.Join(errs...)
}

func (c *AccessConfig) settings() settings {
	return settings{
		path: c.Path, output: c.Output, maxSizeMB: c.MaxSizeMB, maxFiles: c.MaxFiles,
		queueSize: c.QueueSize, clientIP: c.ClientIP, hashKey: c.HashKey,
	}
}

// AccessRecord is one request of the access log. Empty strings are written
// as "-" in the Combined Log Format and left out of JSON lines.
type AccessRecord struct {
	// Time is when the request started: its headers were read, as Apache's
	// %t (nginx logs when it ended). The fingerprint log's time is the same
	// instant. If zero, Write sets the current time. Lines give it in UTC.
	Time time.Time
	// RemoteIP is the client address, written as AccessConfig.ClientIP says.
	RemoteIP netip.Addr
	// User is the name of the authenticated user (HTTP Basic
	// authentication), or empty. Set it only once the credentials were
	// accepted: a refused name is the client's choice.
	User string
	// Method, URI and Proto make the request line: the method, the request
	// target as sent (path and query), and "HTTP/1.1", "HTTP/2.0" or
	// "HTTP/3.0".
	Method string
	URI    string
	Proto  string
	// Status is the HTTP status sent.
	Status int
	// Bytes is the size of the response body sent; zero is written "-" in
	// the Combined Log Format, as Apache's %b does.
	Bytes int64
	// Referer and UserAgent are the request's headers, as sent.
	Referer   string
	UserAgent string
	// Host, Duration (from the request's headers read to its response
	// ended) and RequestID (the ID on the pages the edge serves and in
	// X-Request-Id upstream) are written only in JSON lines: the Combined
	// Log Format has no place for them (see the package documentation).
	Host      string
	Duration  time.Duration
	RequestID string
}

// AccessWriter writes the access log from a goroutine of its own, as Writer
// writes the fingerprint log: with a bounded queue that drops and counts
// records rather than wait, size rotation, gzip and retention, and Reopen.
// Its methods are safe for concurrent use.
type AccessWriter struct {
	sink[AccessRecord]

	json bool

	// Owned by the writing goroutine.
	addr *addrEncoder
	ip   []byte // the client address of the line being encoded
}

// NewAccessWriter opens the access log and starts its writing goroutine.
// Close stops it.
func NewAccessWriter(cfg AccessConfig) (*AccessWriter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &AccessWriter{
		json: cfg.Format == FormatJSON,
		addr: newAddrEncoder(cfg.ClientIP, cfg.HashKey),
	}
	if err := w.start(cfg.settings(), w.encode); err != nil {
		return nil, err
	}
	return w, nil
}

// Write queues a copy of r, or drops it (and counts it) if the queue is full
// or the AccessWriter closed. A zero r.Time is set to the current time.
// Write never blocks and does not allocate.
func (w *AccessWriter) Write(r *AccessRecord) {
	if !r.Time.IsZero() {
		w.put(r)
		return
	}
	e := *r
	e.Time = time.Now()
	w.put(&e)
}

// encode appends the line of a queued record, with its client address as
// the configuration says.
func (w *AccessWriter) encode(b []byte, r *AccessRecord) []byte {
	if w.json {
		w.ip = w.addr.appendJSON(w.ip[:0], r.RemoteIP)
		return r.appendJSON(b, w.ip)
	}
	w.ip = w.addr.appendCombined(w.ip[:0], r.RemoteIP)
	return r.appendCombined(b, w.ip)
}

// AppendCombined appends the record as one line of the NCSA Combined Log
// Format, without a newline:
//
//	%h - %u [%d/%b/%Y:%H:%M:%S %z] "%r" %>s %b "%{Referer}i" "%{User-Agent}i"
//
// with the full client address. See the package documentation for the
// escaping.
func (r *AccessRecord) AppendCombined(b []byte) []byte {
	var buf [64]byte
	return r.appendCombined(b, r.RemoteIP.Unmap().WithZone("").AppendTo(buf[:0]))
}

// appendCombined appends the record as AppendCombined does, with the client
// address host: bytes that need no escaping (addrEncoder's), "-" if empty.
func (r *AccessRecord) appendCombined(b []byte, host []byte) []byte {
	if len(host) == 0 {
		b = append(b, '-')
	}
	b = append(b, host...)
	b = append(b, " - "...)
	b = appendLogItem(b, r.User, true)
	b = append(b, " ["...)
	b = appendCombinedTime(b, r.Time.UTC())
	b = append(b, "] \""...)
	if r.Method == "" && r.URI == "" && r.Proto == "" {
		b = append(b, '-')
	}
	sep := false
	for _, part := range [...]string{r.Method, r.URI, r.Proto} {
		if part == "" {
			continue
		}
		if sep {
			b = append(b, ' ')
		}
		b, sep = appendEscaped(b, cut(part), false), true
	}
	b = append(b, "\" "...)
	status := r.Status
	if status < 0 || status > 999 {
		status = 0
	}
	b = append(b, byte('0'+status/100), byte('0'+status/10%10), byte('0'+status%10), ' ')
	if r.Bytes > 0 {
		b = strconv.AppendInt(b, r.Bytes, 10)
	} else {
		b = append(b, '-')
	}
	b = append(b, " \""...)
	b = appendLogItem(b, r.Referer, false)
	b = append(b, "\" \""...)
	b = appendLogItem(b, r.UserAgent, false)
	return append(b, '"')
}

// AppendJSON appends the record as one JSON object, without a newline, with
// the full client address: time, remote_ip, user, host, method, uri, proto,
// status, bytes, referer, user_agent, duration_ms, in this order.
func (r *AccessRecord) AppendJSON(b []byte) []byte {
	var buf [64]byte
	return r.appendJSON(b, r.RemoteIP.Unmap().WithZone("").AppendTo(buf[:0]))
}

// appendJSON appends the record as AppendJSON does, with the client address
// ip: bytes that need no escaping (addrEncoder's), left out if empty.
func (r *AccessRecord) appendJSON(b []byte, ip []byte) []byte {
	b = append(b, `{"time":"`...)
	b = appendTime(b, r.Time)
	b = append(b, '"')
	str := func(name, v string) {
		if v != "" {
			b = append(b, ',', '"')
			b = append(b, name...)
			b = append(b, '"', ':')
			b = appendString(b, v)
		}
	}
	str("request_id", r.RequestID)
	if len(ip) > 0 {
		b = append(b, `,"remote_ip":"`...)
		b = append(b, ip...)
		b = append(b, '"')
	}
	str("user", r.User)
	str("host", r.Host)
	str("method", r.Method)
	str("uri", r.URI)
	str("proto", r.Proto)
	if r.Status != 0 {
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(r.Status), 10)
	}
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, r.Bytes, 10)
	str("referer", r.Referer)
	str("user_agent", r.UserAgent)
	b = append(b, `,"duration_ms":`...)
	b = appendMillis(b, r.Duration)
	return append(b, '}')
}

// appendCombinedTime appends t (in UTC) as combinedTimeLayout does, without
// interpreting the layout: this is a third of a line's encoding otherwise.
func appendCombinedTime(b []byte, t time.Time) []byte {
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, combinedTimeLayout)
	}
	hour, minute, sec := t.Clock()
	two := func(b []byte, n int) []byte { return append(b, byte('0'+n/10), byte('0'+n%10)) }
	b = two(b, day)
	b = append(b, '/')
	b = append(b, month.String()[:3]...)
	b = append(b, '/')
	b = two(b, year/100)
	b = two(b, year%100)
	b = append(b, ':')
	b = two(b, hour)
	b = append(b, ':')
	b = two(b, minute)
	b = append(b, ':')
	b = two(b, sec)
	return append(b, " +0000"...)
}

// upperHex are the digits of nginx's escapes.
const upperHex = "0123456789ABCDEF"

// appendLogItem appends a field of a Combined Log Format line: "-" if s is
// empty, otherwise s cut to MaxFieldBytes and escaped.
func appendLogItem(b []byte, s string, user bool) []byte {
	if s == "" {
		return append(b, '-')
	}
	return appendEscaped(b, cut(s), user)
}

// appendEscaped appends s escaped as nginx escapes variables in its access
// log: '"', '\\', the control characters, DEL and every byte from 0x80 as
// \xHH. With user, the space, '[' and ']' are escaped too, so that a user
// name cannot pass for the date that follows it.
func appendEscaped(b []byte, s string, user bool) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && !(user && (c == ' ' || c == '[' || c == ']')) {
			continue
		}
		b = append(b, s[start:i]...)
		b = append(b, '\\', 'x', upperHex[c>>4], upperHex[c&0xf])
		start = i + 1
	}
	return append(b, s[start:]...)
}
