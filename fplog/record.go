package fplog

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"time"
	"unicode/utf8"
)

// Record is what the edge knows about one request: one line of the log.
// Empty strings, a nil Challenge, an empty Rules and a zero Status are left
// out of the line. See the package documentation for each field.
type Record struct {
	Time     time.Time
	RemoteIP netip.Addr
	// ClientIP is the client address as logged (remote_ip). ParseLine sets
	// it; a Writer derives it from RemoteIP and Config.ClientIP and ignores
	// what the caller put here. AppendJSON writes it, or RemoteIP if empty.
	ClientIP     string
	Host         string
	Method       string
	Path         string
	Proto        string
	TLSVersion   string
	SNI          string
	ALPN         string
	JA4          string
	JA4R         string
	JA4O         string
	JA4RO        string
	HFP          string
	HFPR         string
	H2FP         string
	JA4H         string
	UserAgent    string
	ClientFamily string
	Weight       int
	Rules        []string
	Action       string
	Challenge    *Challenge
	Status       int
	Bytes        int64
	Duration     time.Duration
}

// Challenge is the challenge served with a request.
type Challenge struct {
	Alg  string // "pow" or "metarefresh"
	Bits int    // the difficulty in leading zero bits
}

// Actions, as the log writes them.
const (
	ActionAllow     = "ALLOW"
	ActionChallenge = "CHALLENGE"
	ActionDeny      = "DENY"
	ActionRate      = "RATE"
	ActionPass      = "PASS"
)

// Bounds of what a line holds.
const (
	// MaxFieldBytes bounds each string field of a line: longer values
	// (a User-Agent or path sent to fill the disk) are cut at a character
	// boundary.
	MaxFieldBytes = 4096
	// MaxRules bounds the rules of a line.
	MaxRules = 64
	// MaxLineBytes bounds the lines the reader accepts; longer lines are
	// counted as bad and skipped.
	MaxLineBytes = 1 << 20
)

// maxDurationMS bounds duration_ms so that it converts to a Duration.
const maxDurationMS = 1e12

// ErrBadLine is wrapped by ParseLine's errors.
var ErrBadLine = errors.New("fplog: bad line")

// timeLayout is RFC 3339 in UTC with milliseconds.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// AppendJSON appends the record as one JSON object, without a newline, with
// the fields in the documented order.
func (r *Record) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	first := true
	field := func(name string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
	}
	str := func(name, v string) {
		if v != "" {
			field(name)
			b = appendString(b, v)
		}
	}
	if !r.Time.IsZero() {
		field("time")
		b = append(b, '"')
		b = r.Time.UTC().AppendFormat(b, timeLayout)
		b = append(b, '"')
	}
	if r.ClientIP != "" {
		str("remote_ip", r.ClientIP)
	} else if r.RemoteIP.IsValid() {
		field("remote_ip")
		b = append(b, '"')
		b = r.RemoteIP.AppendTo(b)
		b = append(b, '"')
	}
	str("host", r.Host)
	str("method", r.Method)
	str("path", r.Path)
	str("proto", r.Proto)
	str("tls_version", r.TLSVersion)
	str("sni", r.SNI)
	str("alpn", r.ALPN)
	str("ja4", r.JA4)
	str("ja4_r", r.JA4R)
	str("ja4_o", r.JA4O)
	str("ja4_ro", r.JA4RO)
	str("hfp", r.HFP)
	str("hfp_r", r.HFPR)
	str("h2fp", r.H2FP)
	str("ja4h", r.JA4H)
	str("user_agent", r.UserAgent)
	str("client_family", r.ClientFamily)
	field("weight")
	b = strconv.AppendInt(b, int64(r.Weight), 10)
	if len(r.Rules) > 0 {
		field("rules")
		b = append(b, '[')
		for i, rule := range r.Rules[:min(len(r.Rules), MaxRules)] {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, rule)
		}
		b = append(b, ']')
	}
	str("action", r.Action)
	if c := r.Challenge; c != nil {
		field("challenge")
		b = append(b, `{"alg":`...)
		b = appendString(b, c.Alg)
		b = append(b, `,"bits":`...)
		b = strconv.AppendInt(b, int64(c.Bits), 10)
		b = append(b, '}')
	}
	if r.Status != 0 {
		field("status")
		b = strconv.AppendInt(b, int64(r.Status), 10)
	}
	field("bytes")
	b = strconv.AppendInt(b, r.Bytes, 10)
	field("duration_ms")
	b = strconv.AppendFloat(b, float64(r.Duration.Round(time.Microsecond))/1e6, 'f', -1, 64)
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// plainASCII reports, for each ASCII byte, whether a JSON string holds it
// as it is. It is a read-only table.
var plainASCII = func() (t [utf8.RuneSelf]bool) {
	for c := byte(0x20); c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendString appends s as a JSON string, cut to MaxFieldBytes, with
// invalid UTF-8 replaced by U+FFFD and the characters that JSON, HTML and
// JavaScript treat specially escaped.
func appendString(b []byte, s string) []byte {
	s = cut(s)
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plainASCII[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// cut returns s, or its first MaxFieldBytes bytes cut back to the start of
// a character.
func cut(s string) string {
	if len(s) <= MaxFieldBytes {
		return s
	}
	n := MaxFieldBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// line is a record as encoding/json reads it.
type line struct {
	Time         string     `json:"time"`
	RemoteIP     string     `json:"remote_ip"`
	Host         string     `json:"host"`
	Method       string     `json:"method"`
	Path         string     `json:"path"`
	Proto        string     `json:"proto"`
	TLSVersion   string     `json:"tls_version"`
	SNI          string     `json:"sni"`
	ALPN         string     `json:"alpn"`
	JA4          string     `json:"ja4"`
	JA4R         string     `json:"ja4_r"`
	JA4O         string     `json:"ja4_o"`
	JA4RO        string     `json:"ja4_ro"`
	HFP          string     `json:"hfp"`
	HFPR         string     `json:"hfp_r"`
	H2FP         string     `json:"h2fp"`
	JA4H         string     `json:"ja4h"`
	UserAgent    string     `json:"user_agent"`
	ClientFamily string     `json:"client_family"`
	Weight       int        `json:"weight"`
	Rules        []string   `json:"rules"`
	Action       string     `json:"action"`
	Challenge    *challenge `json:"challenge"`
	Status       int        `json:"status"`
	Bytes        int64      `json:"bytes"`
	DurationMS   float64    `json:"duration_ms"`
}

type challenge struct {
	Alg  string `json:"alg"`
	Bits int    `json:"bits"`
}

// ParseLine reads one line of the log (without its newline). A line that is
// not a JSON object of the documented fields, with a time in RFC 3339 and a
// duration in range, returns an error wrapping ErrBadLine. Fields it does
// not know are ignored.
func ParseLine(data []byte) (Record, error) {
	if len(data) > MaxLineBytes {
		return Record{}, fmt.Errorf("%w: longer than %d bytes", ErrBadLine, MaxLineBytes)
	}
	var l line
	if err := json.Unmarshal(data, &l); err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrBadLine, err)
	}
	r := Record{
		ClientIP:     l.RemoteIP,
		Host:         l.Host,
		Method:       l.Method,
		Path:         l.Path,
		Proto:        l.Proto,
		TLSVersion:   l.TLSVersion,
		SNI:          l.SNI,
		ALPN:         l.ALPN,
		JA4:          l.JA4,
		JA4R:         l.JA4R,
		JA4O:         l.JA4O,
		JA4RO:        l.JA4RO,
		HFP:          l.HFP,
		HFPR:         l.HFPR,
		H2FP:         l.H2FP,
		JA4H:         l.JA4H,
		UserAgent:    l.UserAgent,
		ClientFamily: l.ClientFamily,
		Weight:       l.Weight,
		Rules:        l.Rules,
		Action:       l.Action,
		Status:       l.Status,
		Bytes:        l.Bytes,
	}
	if len(r.Rules) == 0 {
		r.Rules = nil
	}
	if l.Time != "" {
		t, err := time.Parse(time.RFC3339Nano, l.Time)
		if err != nil {
			return Record{}, fmt.Errorf("%w: time: %w", ErrBadLine, err)
		}
		t = t.UTC().Truncate(time.Millisecond)
		if t.Year() < 0 || t.Year() > 9999 {
			return Record{}, fmt.Errorf("%w: time %q out of range", ErrBadLine, l.Time)
		}
		r.Time = t
	}
	if a, err := netip.ParseAddr(l.RemoteIP); err == nil {
		r.RemoteIP = a
	}
	if l.Challenge != nil {
		r.Challenge = &Challenge{Alg: l.Challenge.Alg, Bits: l.Challenge.Bits}
	}
	if math.IsNaN(l.DurationMS) || math.Abs(l.DurationMS) > maxDurationMS {
		return Record{}, fmt.Errorf("%w: duration_ms %v out of range", ErrBadLine, l.DurationMS)
	}
	r.Duration = time.Duration(math.Round(l.DurationMS*1000)) * time.Microsecond
	return r, nil
}
