package geo

import (
	"github.com/oschwald/maxminddb-golang/v2/mmdbdata"
)

// Bounds on the strings a record decode keeps.
const (
	maxOrgBytes  = 256
	maxCodeBytes = 8
)

// UnmarshalMaxMindDBCursor decodes the fields a lookup needs from a record
// of any of the three layouts the free databases use, and skips the rest:
//
//	GeoLite2-ASN, DB-IP ASN Lite:  autonomous_system_number (uint32),
//	                               autonomous_system_organization (string)
//	GeoLite2-Country/City, DB-IP:  country: {iso_code (string), …}
//	IPinfo Lite:                   asn ("AS13335"), as_name, country_code
//	                               (country is the name there, ignored)
//
// A field of an unexpected kind is skipped, not an error: the other fields
// of the record still count.
func (r *record) UnmarshalMaxMindDBCursor(c mmdbdata.Cursor) (mmdbdata.Cursor, error) {
	m, err := c.Map()
	if err != nil {
		return mmdbdata.Cursor{}, mmdbdata.NormalizeUnmarshalError[record](err)
	}
	var next mmdbdata.Cursor
	for {
		key, val, ok := m.Next(next)
		if !ok {
			break
		}
		switch string(key) {
		case "autonomous_system_number", "asn":
			next, err = readASN(val, &r.asn)
		case "autonomous_system_organization", "as_name":
			var org string
			org, next, err = readString(val, maxOrgBytes)
			if org != "" {
				r.org = org
			}
		case "country":
			next, err = readCountry(val, &r.country)
		case "country_code":
			next, err = readCode(val, &r.country)
		default:
			next, err = val.Skip()
		}
		if err != nil {
			return mmdbdata.Cursor{}, err
		}
	}
	return m.End()
}

// readString reads a string of at most maxBytes bytes; a value of another
// kind or a longer string is skipped.
func readString(c mmdbdata.Cursor, maxBytes uint64) (string, mmdbdata.Cursor, error) {
	k, err := c.Kind()
	if err != nil {
		return "", mmdbdata.Cursor{}, err
	}
	if k == mmdbdata.KindString {
		if s, next, err := c.ReadStringMaxSize(maxBytes); err == nil {
			return s, next, nil
		}
	}
	next, err := c.Skip()
	return "", next, err
}

// readASN reads an AS number written as a number or as IPinfo writes it,
// "AS13335".
func readASN(c mmdbdata.Cursor, asn *uint32) (mmdbdata.Cursor, error) {
	k, err := c.Kind()
	if err != nil {
		return mmdbdata.Cursor{}, err
	}
	switch k {
	case mmdbdata.KindUint16, mmdbdata.KindUint32, mmdbdata.KindUint64:
		v, next, err := c.ReadUint()
		if err == nil && v <= 1<<32-1 {
			*asn = uint32(v)
		}
		return next, err
	case mmdbdata.KindString:
		s, next, err := readString(c, maxCodeBytes+10)
		if n, ok := parseASN(s); ok {
			*asn = n
		}
		return next, err
	}
	return c.Skip()
}

// parseASN parses "AS13335", "as13335" or "13335".
func parseASN(s string) (uint32, bool) {
	if len(s) >= 2 && (s[0] == 'A' || s[0] == 'a') && (s[1] == 'S' || s[1] == 's') {
		s = s[2:]
	}
	if s == "" || len(s) > 10 {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + uint64(s[i]-'0')
	}
	return uint32(n), n <= 1<<32-1
}

// readCountry reads "country": GeoLite2's map with iso_code, or a bare
// two-letter code (IPinfo's older country_asn layout). IPinfo Lite's
// country name is not a code and is left out.
func readCountry(c mmdbdata.Cursor, code *string) (mmdbdata.Cursor, error) {
	k, err := c.Kind()
	if err != nil {
		return mmdbdata.Cursor{}, err
	}
	switch k {
	case mmdbdata.KindString:
		return readCode(c, code)
	case mmdbdata.KindMap:
	default:
		return c.Skip()
	}
	m, err := c.Map()
	if err != nil {
		return mmdbdata.Cursor{}, err
	}
	var next mmdbdata.Cursor
	for {
		key, val, ok := m.Next(next)
		if !ok {
			break
		}
		if string(key) == "iso_code" {
			next, err = readCode(val, code)
		} else {
			next, err = val.Skip()
		}
		if err != nil {
			return mmdbdata.Cursor{}, err
		}
	}
	return m.End()
}

// readCode reads an ISO 3166-1 alpha-2 code into code, upper-cased; any
// other string leaves code as it is.
func readCode(c mmdbdata.Cursor, code *string) (mmdbdata.Cursor, error) {
	s, next, err := readString(c, maxCodeBytes)
	if cc, ok := countryCode(s); ok {
		*code = cc
	}
	return next, err
}

// countryCode returns s upper-cased if it is two ASCII letters.
func countryCode(s string) (string, bool) {
	if len(s) != 2 {
		return "", false
	}
	var b [2]byte
	for i := range 2 {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z':
		case 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		default:
			return "", false
		}
		b[i] = c
	}
	if b[0] == s[0] && b[1] == s[1] {
		return s, true
	}
	return string(b[:]), true
}
