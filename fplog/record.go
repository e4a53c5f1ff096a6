package fplog

import (
	"encoding/binary"
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
// Empty strings, a zero ASN, a nil Challenge, an empty Rules and a zero
// Status are left out of the line. See the package documentation for each
// field.
type Record struct {
	// Time is when the request started: its headers were read. If zero,
	// Writer.Write sets the current time.
	Time time.Time
	// RequestID is the request's ID: the one shown on the pages the edge
	// serves and sent upstream as X-Request-Id.
	RequestID string
	RemoteIP  netip.Addr
	// ClientIP is the client address as logged (remote_ip). ParseLine sets
	// it; a Writer derives it from RemoteIP and Config.ClientIP and ignores
	// what the caller put here. AppendJSON writes it, or RemoteIP if empty.
	ClientIP string
	// ASN and ASOrg are the autonomous system the client address belongs
	// to, its number and organization; Country is the address's ISO 3166-1
	// alpha-2 country code. They are set only with a geo database; zero
	// and empty values are left out.
	ASN        uint32
	ASOrg      string
	Country    string
	Host       string
	Method     string
	Path       string
	Proto      string
	TLSVersion string
	SNI        string
	ALPN       string
	JA4        string
	JA4R       string
	JA4O       string
	JA4RO      string
	// JA4Session is the JA4 of the session's full handshake, which the
	// policy judged the request by, when it is not JA4: the connection
	// resumed a session (its hello's pre_shared_key counts in JA4).
	JA4Session string
	// Resumed marks a connection that resumed a TLS session.
	Resumed      bool
	HFP          string
	HFPR         string
	H2FP         string
	JA4H         string
	UserAgent    string
	ClientFamily string
	// Cluster is the client cluster the request counted for in the
	// upstream's line: 16 hex digits (the edge's cluster key).
	Cluster string
	// Pressure is the pressure of the site's upstreams (0 to 1) when the
	// request was judged, written to two decimals; left out when zero.
	Pressure float64
	Weight   int
	Rules    []string
	Action   string
	// DryRun marks a request the edge forwarded although Action says what
	// the policy decided (the configuration's dry_run).
	DryRun bool
	// Reason says why the edge answered the request itself with an
	// error instead of passing it on: a snake_case word from the edge's
	// fixed list ("bad_path", "method_not_allowed", …). Empty when the
	// site or the policy answered.
	Reason    string
	Challenge *Challenge
	Status    int
	Bytes     int64
	Duration  time.Duration
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
	ActionDivert    = "DIVERT"
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
	var buf [64]byte
	ip := buf[:0]
	if r.ClientIP == "" {
		ip = r.RemoteIP.AppendTo(ip) // nothing for the zero Addr
	}
	return r.appendJSON(b, ip)
}

// appendJSON appends the record as AppendJSON does, with remote_ip
// r.ClientIP if set, else ip: bytes that need no escaping (addrEncoder's).
func (r *Record) appendJSON(b []byte, ip []byte) []byte {
	b = append(b, '{')
	if !r.Time.IsZero() {
		b = append(b, `"time":"`...)
		b = appendTime(b, r.Time)
		b = append(b, '"', ',')
	}
	b = appendField(b, `"request_id":`, r.RequestID)
	if r.ClientIP != "" {
		b = appendField(b, `"remote_ip":`, r.ClientIP)
	} else if len(ip) > 0 {
		b = append(b, `"remote_ip":"`...)
		b = append(b, ip...)
		b = append(b, '"', ',')
	}
	if r.ASN != 0 {
		b = append(b, `"asn":`...)
		b = strconv.AppendUint(b, uint64(r.ASN), 10)
		b = append(b, ',')
	}
	b = appendField(b, `"as_org":`, r.ASOrg)
	b = appendField(b, `"country":`, r.Country)
	b = appendField(b, `"host":`, r.Host)
	b = appendField(b, `"method":`, r.Method)
	b = appendField(b, `"path":`, r.Path)
	b = appendField(b, `"proto":`, r.Proto)
	b = appendField(b, `"tls_version":`, r.TLSVersion)
	b = appendField(b, `"sni":`, r.SNI)
	b = appendField(b, `"alpn":`, r.ALPN)
	b = appendField(b, `"ja4":`, r.JA4)
	b = appendField(b, `"ja4_r":`, r.JA4R)
	b = appendField(b, `"ja4_o":`, r.JA4O)
	b = appendField(b, `"ja4_ro":`, r.JA4RO)
	b = appendField(b, `"ja4_session":`, r.JA4Session)
	if r.Resumed {
		b = append(b, `"resumed":true,`...)
	}
	b = appendField(b, `"hfp":`, r.HFP)
	b = appendField(b, `"hfp_r":`, r.HFPR)
	b = appendField(b, `"h2fp":`, r.H2FP)
	b = appendField(b, `"ja4h":`, r.JA4H)
	b = appendField(b, `"user_agent":`, r.UserAgent)
	b = appendField(b, `"client_family":`, r.ClientFamily)
	b = appendField(b, `"cluster":`, r.Cluster)
	if p := math.Round(r.Pressure*100) / 100; p > 0 && p <= 1 {
		b = append(b, `"pressure":`...)
		b = strconv.AppendFloat(b, p, 'f', -1, 64)
		b = append(b, ',')
	}
	b = append(b, `"weight":`...)
	b = strconv.AppendInt(b, int64(r.Weight), 10)
	if len(r.Rules) > 0 {
		b = append(b, `,"rules":[`...)
		for i, rule := range r.Rules[:min(len(r.Rules), MaxRules)] {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, rule)
		}
		b = append(b, ']')
	}
	if r.Action != "" {
		b = append(b, `,"action":`...)
		b = appendString(b, r.Action)
	}
	if r.DryRun {
		b = append(b, `,"dry_run":true`...)
	}
	if r.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendString(b, r.Reason)
	}
	if c := r.Challenge; c != nil {
		b = append(b, `,"challenge":{"alg":`...)
		b = appendString(b, c.Alg)
		b = append(b, `,"bits":`...)
		b = strconv.AppendInt(b, int64(c.Bits), 10)
		b = append(b, '}')
	}
	if r.Status != 0 {
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(r.Status), 10)
	}
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, r.Bytes, 10)
	b = append(b, `,"duration_ms":`...)
	b = appendMillis(b, r.Duration)
	return append(b, '}')
}

// appendField appends key (quoted, with its colon), the JSON string v and a
// comma, or nothing if v is empty. Every field before weight, which is
// always there, ends with its comma; every field after it starts with one.
func appendField(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, key...)
	b = appendString(b, v)
	return append(b, ',')
}

// appendTime appends t in UTC as timeLayout does, without interpreting the
// layout.
func appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, timeLayout)
	}
	hour, minute, sec := t.Clock()
	ms := t.Nanosecond() / 1e6
	b = append(b, byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-')
	b = append(b, byte('0'+month/10), byte('0'+month%10), '-', byte('0'+day/10), byte('0'+day%10), 'T')
	b = append(b, byte('0'+hour/10), byte('0'+hour%10), ':', byte('0'+minute/10), byte('0'+minute%10), ':')
	b = append(b, byte('0'+sec/10), byte('0'+sec%10), '.')
	return append(b, byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z')
}

// appendMillis appends d rounded to the microsecond, in milliseconds with
// up to three decimals and no trailing zeros: "1.235", "0.25", "2000". It is
// what strconv.AppendFloat(ms, 'f', -1, 64) writes for durations under 2^53
// nanoseconds (104 days), and exact beyond.
func appendMillis(b []byte, d time.Duration) []byte {
	us := int64(d.Round(time.Microsecond) / time.Microsecond)
	if us < 0 {
		b = append(b, '-')
		us = -us
	}
	b = strconv.AppendInt(b, us/1000, 10)
	frac := us % 1000
	if frac == 0 {
		return b
	}
	b = append(b, '.', byte('0'+frac/100))
	if frac %= 100; frac != 0 {
		b = append(b, byte('0'+frac/10))
		if frac %= 10; frac != 0 {
			b = append(b, byte('0'+frac))
		}
	}
	return b
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

// Masks of plainWord.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// plainWord reports whether the eight bytes of x are all plain ASCII
// (plainASCII), so that appendString can copy them as they are. It tests
// them at once (SWAR; "Determine if a word has a byte less than n" and
// "has a zero byte", Bit Twiddling Hacks, Sean Eron Anderson): no byte
// below 0x20 or from 0x80 up, none of '"', '\\', '<', '>' and '&'.
func plainWord(x uint64) bool {
	zero := func(v uint64) uint64 { return (v - ones) & ^v & highs }
	special := (x - ones*0x20) | x | // bytes below 0x20 borrow; from 0x80 up have the high bit
		zero(x^(ones*'"')) | zero(x^(ones*'\\')) | zero(x^(ones*'<')) | zero(x^(ones*'>')) | zero(x^(ones*'&'))
	return special&highs == 0
}

// appendString appends s as a JSON string, cut to MaxFieldBytes, with
// invalid UTF-8 replaced by U+FFFD and the characters that JSON, HTML and
// JavaScript treat specially escaped.
func appendString(b []byte, s string) []byte {
	s = cut(s)
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) && plainWord(binary.LittleEndian.Uint64([]byte(s[i:i+8]))) {
			i += 8
			continue
		}
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
	RequestID    string     `json:"request_id"`
	RemoteIP     string     `json:"remote_ip"`
	ASN          uint32     `json:"asn"`
	ASOrg        string     `json:"as_org"`
	Country      string     `json:"country"`
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
	JA4Session   string     `json:"ja4_session"`
	Resumed      bool       `json:"resumed"`
	HFP          string     `json:"hfp"`
	HFPR         string     `json:"hfp_r"`
	H2FP         string     `json:"h2fp"`
	JA4H         string     `json:"ja4h"`
	UserAgent    string     `json:"user_agent"`
	ClientFamily string     `json:"client_family"`
	Cluster      string     `json:"cluster"`
	Pressure     float64    `json:"pressure"`
	Weight       int        `json:"weight"`
	Rules        []string   `json:"rules"`
	Action       string     `json:"action"`
	DryRun       bool       `json:"dry_run"`
	Reason       string     `json:"reason"`
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
		RequestID:    l.RequestID,
		ClientIP:     l.RemoteIP,
		ASN:          l.ASN,
		ASOrg:        l.ASOrg,
		Country:      l.Country,
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
		JA4Session:   l.JA4Session,
		Resumed:      l.Resumed,
		HFP:          l.HFP,
		HFPR:         l.HFPR,
		H2FP:         l.H2FP,
		JA4H:         l.JA4H,
		UserAgent:    l.UserAgent,
		ClientFamily: l.ClientFamily,
		Cluster:      l.Cluster,
		Weight:       l.Weight,
		Rules:        l.Rules,
		Action:       l.Action,
		DryRun:       l.DryRun,
		Reason:       l.Reason,
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
	if l.Pressure < 0 || l.Pressure > 1 || math.IsNaN(l.Pressure) {
		return Record{}, fmt.Errorf("%w: pressure %v out of range", ErrBadLine, l.Pressure)
	}
	r.Pressure = l.Pressure
	return r, nil
}
