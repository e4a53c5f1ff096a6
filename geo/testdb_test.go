package geo_test

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// A database is written the way the real ones are, with mmdbwriter: the
// type, the IP version, and the records of networks.
type testDB struct {
	typ       string
	ipVersion int // 4 or 6
	built     int64
	nets      map[string]mmdbtype.Map // CIDR → record
	noDesc    bool                    // no description in the metadata (optional in the format)
}

// bytes returns the database file's contents.
func (d testDB) bytes(t testing.TB) []byte {
	t.Helper()
	v := d.ipVersion
	if v == 0 {
		v = 6
	}
	desc := map[string]string{"en": d.typ + " for tests"}
	if d.noDesc {
		desc = nil
	}
	w, err := mmdbwriter.New(mmdbwriter.Options{
		DatabaseType:            d.typ,
		IPVersion:               v,
		RecordSize:              24,
		BuildEpoch:              d.built,
		IncludeReservedNetworks: true, // the documentation networks
		Description:             desc,
	})
	if err != nil {
		t.Fatal(err)
	}
	for cidr, rec := range d.nets {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Insert(n, rec); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// write writes the database to name in dir, atomically (a new file renamed
// over the old one, as the databases' updaters do), and returns its path.
func (d testDB) write(t testing.TB, dir, name string) string {
	t.Helper()
	return writeFile(t, dir, name, d.bytes(t))
}

func writeFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	tmp, err := os.CreateTemp(dir, name+".tmp*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmp.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		t.Fatal(err)
	}
	return path
}

type m = mmdbtype.Map
type s = mmdbtype.String
type u32 = mmdbtype.Uint32

// The networks of the test databases (RFC 5737 and RFC 3849 documentation
// ranges).
const (
	v4a = "203.0.113.0/24"
	v4b = "198.51.100.0/25"
	v6a = "2001:db8::/32"
)

// geolite2ASN is GeoLite2-ASN's layout.
func geolite2ASN() testDB {
	return testDB{typ: "GeoLite2-ASN", built: 1767225600, nets: map[string]mmdbtype.Map{
		v4a: {"autonomous_system_number": u32(64500), "autonomous_system_organization": s("Example Transit GmbH")},
		v4b: {"autonomous_system_number": u32(64501), "autonomous_system_organization": s("Documentation Net")},
		v6a: {"autonomous_system_number": u32(64502), "autonomous_system_organization": s("IPv6 Example")},
	}}
}

// country is GeoLite2-Country's country block, names and all.
func country(code, name string, eu bool) m {
	return m{
		"geoname_id":           u32(2921044),
		"iso_code":             s(code),
		"is_in_european_union": mmdbtype.Bool(eu),
		"names":                m{"de": s(name), "en": s(name), "ja": s("国"), "zh-CN": s("国")},
	}
}

// geolite2Country is GeoLite2-Country's layout.
func geolite2Country() testDB {
	continent := m{"code": s("EU"), "geoname_id": u32(6255148), "names": m{"en": s("Europe")}}
	return testDB{typ: "GeoLite2-Country", built: 1767225600, nets: map[string]mmdbtype.Map{
		v4a: {"continent": continent, "country": country("DE", "Germany", true), "registered_country": country("DE", "Germany", true)},
		v4b: {"continent": continent, "country": country("FR", "France", true), "registered_country": country("FR", "France", true)},
		v6a: {"continent": continent, "country": country("NL", "Netherlands", true), "registered_country": country("NL", "Netherlands", true)},
	}}
}

// dbipASN is DB-IP's IP to ASN Lite: GeoLite2-ASN's field names.
func dbipASN() testDB {
	d := geolite2ASN()
	d.typ = "DBIP-ASN-Lite (compat=GeoLite2-ASN)"
	return d
}

// dbipCountry is DB-IP's IP to Country Lite: GeoLite2-Country's country
// block, without registered_country.
func dbipCountry() testDB {
	return testDB{typ: "DBIP-Country-Lite", built: 1767225600, nets: map[string]mmdbtype.Map{
		v4a: {"continent": m{"code": s("EU")}, "country": country("DE", "Deutschland", true)},
		v4b: {"continent": m{"code": s("EU")}, "country": country("FR", "France", true)},
		v6a: {"continent": m{"code": s("EU")}, "country": country("NL", "Nederland", true)},
	}}
}

// ipinfoLite is IPinfo Lite's flat layout, ASN and country in one file.
func ipinfoLite() testDB {
	rec := func(asn, org, domain, name, code string) m {
		return m{"asn": s(asn), "as_name": s(org), "as_domain": s(domain), "country": s(name),
			"country_code": s(code), "continent": s("Europe"), "continent_code": s("EU")}
	}
	return testDB{typ: "ipinfo lite.mmdb", built: 1767225600, nets: map[string]mmdbtype.Map{
		v4a: rec("AS64500", "Example Transit GmbH", "example.de", "Germany", "DE"),
		v4b: rec("AS64501", "Documentation Net", "example.fr", "France", "FR"),
		v6a: rec("AS64502", "IPv6 Example", "example.nl", "Netherlands", "NL"),
	}}
}
