// Package geofuzz holds the fuzz targets of package geo.
package geofuzz

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maatproxy/maat/geo"
	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
	"github.com/oschwald/maxminddb-golang/v2"
)

type m = mmdbtype.Map
type s = mmdbtype.String

// seed writes a small database of the given type and records.
func seed(f *testing.F, typ string, ipVersion int, recs map[string]mmdbtype.Map) []byte {
	w, err := mmdbwriter.New(mmdbwriter.Options{
		DatabaseType: typ, IPVersion: ipVersion, RecordSize: 24, IncludeReservedNetworks: true,
		Description: map[string]string{"en": typ},
	})
	if err != nil {
		f.Fatal(err)
	}
	for cidr, rec := range recs {
		_, n, _ := net.ParseCIDR(cidr)
		if err := w.Insert(n, rec); err != nil {
			f.Fatal(err)
		}
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		f.Fatal(err)
	}
	return b.Bytes()
}

var probes = []netip.Addr{
	netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("198.51.100.1"),
	netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("::ffff:203.0.113.9"),
	netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("::1"), netip.MustParseAddr("0.0.0.0"),
}

// FuzzOpen: a database file of any bytes opens or fails with ErrInvalid
// naming the file, never panics; when it opens, every lookup agrees with
// maxminddb's own generic decoding of the same record under the rules geo
// documents (the differential check), and a country is two capitals.
func FuzzOpen(f *testing.F) {
	u := func(v uint32) mmdbtype.Uint32 { return mmdbtype.Uint32(v) }
	for _, b := range [][]byte{
		seed(f, "GeoLite2-ASN", 6, map[string]mmdbtype.Map{
			"203.0.113.0/24": {"autonomous_system_number": u(64500), "autonomous_system_organization": s("Example")},
			"2001:db8::/32":  {"autonomous_system_number": u(64502), "autonomous_system_organization": s("Six")},
		}),
		seed(f, "GeoLite2-Country", 6, map[string]mmdbtype.Map{
			"203.0.113.0/24": {"country": m{"iso_code": s("DE"), "names": m{"en": s("Germany")}}, "continent": m{"code": s("EU")}},
		}),
		seed(f, "ipinfo lite.mmdb", 6, map[string]mmdbtype.Map{
			"198.51.100.0/24": {"asn": s("AS64501"), "as_name": s("Lite"), "country": s("France"), "country_code": s("fr")},
		}),
		seed(f, "DBIP-ASN-Lite (compat=GeoLite2-ASN)", 4, map[string]mmdbtype.Map{
			"203.0.113.0/25": {"autonomous_system_number": u(1), "autonomous_system_organization": s("Four")},
		}),
		[]byte("not a database"),
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "fuzz.mmdb")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		db, err := geo.Open(geo.Config{ASNDB: path, CountryDB: path})
		if err != nil {
			if !errors.Is(err, geo.ErrInvalid) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Open: %v", err)
			}
			return
		}
		ref, err := maxminddb.OpenBytes(b)
		if err != nil {
			t.Fatalf("geo opened what maxminddb refuses: %v", err)
		}
		for _, a := range probes {
			got := db.Lookup(a)
			if got.Country != "" && !isCode(got.Country) {
				t.Fatalf("Lookup(%v) country %q", a, got.Country)
			}
			if want, ok := expect(ref, a); ok && got != want {
				t.Fatalf("Lookup(%v) = %+v; the record says %+v", a, got, want)
			}
		}
		db.Describe()
	})
}

// expect decodes a's record generically and applies geo's rules, when they
// give one answer whatever the order of the record's keys.
func expect(r *maxminddb.Reader, a netip.Addr) (geo.Info, bool) {
	a = a.Unmap()
	if r.Metadata.IPVersion == 4 && !a.Is4() {
		return geo.Info{}, true
	}
	var rec map[string]any
	if err := r.Lookup(a).Decode(&rec); err != nil {
		return geo.Info{}, false // geo decodes fewer fields, and may succeed
	}
	var info geo.Info
	if _, both := rec["asn"]; both && rec["autonomous_system_number"] != nil {
		return info, false
	}
	if _, both := rec["as_name"]; both && rec["autonomous_system_organization"] != nil {
		return info, false
	}
	for _, k := range []string{"autonomous_system_number", "asn"} {
		switch v := rec[k].(type) {
		case uint64:
			if v <= 1<<32-1 {
				info.ASN = uint32(v)
			}
		case string:
			info.ASN = parseASN(v)
		}
	}
	for _, k := range []string{"autonomous_system_organization", "as_name"} {
		if v, ok := rec[k].(string); ok && len(v) <= 256 {
			info.ASOrg = v
		}
	}
	var codes []string
	switch c := rec["country"].(type) {
	case string:
		codes = append(codes, c)
	case map[string]any:
		if v, ok := c["iso_code"].(string); ok {
			codes = append(codes, v)
		}
	}
	if v, ok := rec["country_code"].(string); ok {
		codes = append(codes, v)
	}
	var valid []string
	for _, c := range codes {
		if isCode(strings.ToUpper(c)) {
			valid = append(valid, strings.ToUpper(c))
		}
	}
	switch {
	case len(valid) == 1:
		info.Country = valid[0]
	case len(valid) > 1 && valid[0] != valid[1]:
		return info, false // the last in wire order wins; the map lost the order
	case len(valid) > 1:
		info.Country = valid[0]
	}
	return info, true
}

// parseASN parses "AS64500", "as64500" or "64500"; anything else is 0.
func parseASN(v string) uint32 {
	if len(v) >= 2 && strings.EqualFold(v[:2], "AS") {
		v = v[2:]
	}
	if v == "" || len(v) > 10 {
		return 0
	}
	var n uint64
	for _, c := range []byte(v) {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + uint64(c-'0')
	}
	if n > 1<<32-1 {
		return 0
	}
	return uint32(n)
}

func isCode(c string) bool {
	return len(c) == 2 && 'A' <= c[0] && c[0] <= 'Z' && 'A' <= c[1] && c[1] <= 'Z'
}
