package geo_test

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maatproxy/maat/geo"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// The answers every layout gives for the test networks.
var (
	infoA = geo.Info{ASN: 64500, ASOrg: "Example Transit GmbH", Country: "DE"}
	infoB = geo.Info{ASN: 64501, ASOrg: "Documentation Net", Country: "FR"}
	info6 = geo.Info{ASN: 64502, ASOrg: "IPv6 Example", Country: "NL"}
)

// lookups are addresses and what every layout says of them.
var lookups = []struct {
	addr string
	want geo.Info
}{
	{"203.0.113.7", infoA},
	{"203.0.113.255", infoA},
	{"::ffff:203.0.113.7", infoA}, // IPv4-mapped: looked up as IPv4
	{"198.51.100.1", infoB},
	{"198.51.100.200", geo.Info{}}, // outside 198.51.100.0/25
	{"2001:db8::1", info6},
	{"2001:db8:ffff::1", info6},
	{"fe80::1%eth0", geo.Info{}},
	{"192.0.2.1", geo.Info{}}, // in no database
	{"2001:db9::1", geo.Info{}},
}

func TestLookupLayouts(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name         string
		asn, country func() testDB
		shared       bool // one file for both
	}{
		{"GeoLite2", geolite2ASN, geolite2Country, false},
		{"DB-IP Lite", dbipASN, dbipCountry, false},
		{"IPinfo Lite", ipinfoLite, nil, true},
		{"IPinfo country_asn", ipinfoCountryASN, nil, true},
		{"GeoLite2 ASN with IPinfo Lite country", geolite2ASN, ipinfoLite, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := geo.Config{ASNDB: tt.asn().write(t, dir, "asn.mmdb")}
			cfg.CountryDB = cfg.ASNDB
			if !tt.shared {
				cfg.CountryDB = tt.country().write(t, dir, "country.mmdb")
			}
			db, err := geo.Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range lookups {
				if got := db.Lookup(netip.MustParseAddr(l.addr)); got != l.want {
					t.Errorf("Lookup(%s) = %+v, want %+v", l.addr, got, l.want)
				}
			}
			if n := len(db.Describe()); (n == 1) != tt.shared {
				t.Errorf("Describe lists %d files", n)
			}
		})
	}
}

// ipinfoCountryASN is IPinfo's older country_asn layout: country is the
// code there, written lower-case in this test.
func ipinfoCountryASN() testDB {
	rec := func(asn, org, code string) mmdbtype.Map {
		return m{"asn": s(asn), "as_name": s(org), "country": s(code), "country_name": s("x"), "continent": s("EU")}
	}
	return testDB{typ: "ipinfo country_asn.mmdb", nets: map[string]mmdbtype.Map{
		v4a: rec("AS64500", "Example Transit GmbH", "de"),
		v4b: rec("as64501", "Documentation Net", "FR"),
		v6a: rec("64502", "IPv6 Example", "NL"),
	}}
}

// TestLookupRoles: each file serves only its own lookups, and either may
// be off.
func TestLookupRoles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lite := ipinfoLite().write(t, dir, "lite.mmdb")
	a := netip.MustParseAddr("203.0.113.7")
	for _, tt := range []struct {
		name string
		cfg  geo.Config
		want geo.Info
	}{
		{"nothing", geo.Config{}, geo.Info{}},
		{"ASN only", geo.Config{ASNDB: lite}, geo.Info{ASN: 64500, ASOrg: "Example Transit GmbH"}},
		{"country only", geo.Config{CountryDB: lite}, geo.Info{Country: "DE"}},
		{"ASN database without ASNs", geo.Config{ASNDB: geolite2Country().write(t, dir, "c.mmdb")}, geo.Info{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, err := geo.Open(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := db.Lookup(a); got != tt.want {
				t.Errorf("Lookup = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestLookupOddities(t *testing.T) {
	t.Parallel()
	var nilDB *geo.DB
	if got := nilDB.Lookup(netip.MustParseAddr("203.0.113.7")); got != (geo.Info{}) {
		t.Errorf("nil DB: %+v", got)
	}
	if nilDB.Describe() != nil {
		t.Error("nil DB describes something")
	}
	dir := t.TempDir()
	v4only := geolite2ASN()
	delete(v4only.nets, v6a)
	v4only.ipVersion = 4
	noDesc := geolite2ASN()
	noDesc.noDesc = true
	odd := testDB{typ: "odd", nets: map[string]mmdbtype.Map{
		// Fields of unexpected kinds are skipped; the others still count.
		v4a: {"autonomous_system_number": s("not a number"), "autonomous_system_organization": s("Org"),
			"country": m{"iso_code": u32(7)}, "country_code": s("DEU")},
		v4b: {"asn": s("AS99999999999"), "as_name": s(strings.Repeat("x", 300)), "country": s("Germany")},
		v6a: {"asn": mmdbtype.Uint64(1 << 40), "country_code": s("n1")},
	}}
	for _, tt := range []struct {
		name string
		db   testDB
		addr string
		want geo.Info
	}{
		{"IPv4-only database, IPv4", v4only, "203.0.113.7", geo.Info{ASN: 64500, ASOrg: "Example Transit GmbH"}},
		{"IPv4-only database, IPv6", v4only, "2001:db8::1", geo.Info{}},
		{"invalid address", v4only, "", geo.Info{}},
		{"no description", noDesc, "2001:db8::1", geo.Info{ASN: 64502, ASOrg: "IPv6 Example"}},
		{"wrong kinds", odd, "203.0.113.7", geo.Info{ASOrg: "Org"}},
		{"out of range", odd, "198.51.100.1", geo.Info{}},
		{"too large, not a code", odd, "2001:db8::1", geo.Info{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := tt.db.write(t, dir, strings.ReplaceAll(tt.name, " ", "_")+".mmdb")
			db, err := geo.Open(geo.Config{ASNDB: path, CountryDB: path})
			if err != nil {
				t.Fatal(err)
			}
			var a netip.Addr
			if tt.addr != "" {
				a = netip.MustParseAddr(tt.addr)
			}
			for range 2 { // decoded, then from memory
				if got := db.Lookup(a); got != tt.want {
					t.Errorf("Lookup(%s) = %+v, want %+v", tt.addr, got, tt.want)
				}
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := geolite2ASN().bytes(t)
	corrupt := append([]byte{}, good...)
	for i := 0; i < len(corrupt)/3; i++ { // the search tree, scrambled
		corrupt[i] ^= 0xA5
	}
	missing := filepath.Join(dir, "missing.mmdb")
	for _, tt := range []struct {
		name  string
		cfg   geo.Config
		errs  []error
		names []string // what the message must name
	}{
		{"missing", geo.Config{ASNDB: missing}, []error{fs.ErrNotExist}, []string{"ASN database", missing}},
		{"not an mmdb", geo.Config{CountryDB: writeFile(t, dir, "text.mmdb", []byte("hello, world\n"))},
			[]error{geo.ErrInvalid}, []string{"country database", "text.mmdb"}},
		{"empty", geo.Config{CountryDB: writeFile(t, dir, "empty.mmdb", nil)}, []error{geo.ErrInvalid}, []string{"empty.mmdb"}},
		{"truncated", geo.Config{ASNDB: writeFile(t, dir, "half.mmdb", good[:len(good)/2])}, []error{geo.ErrInvalid}, []string{"half.mmdb"}},
		{"corrupt tree", geo.Config{ASNDB: writeFile(t, dir, "corrupt.mmdb", corrupt)}, []error{geo.ErrInvalid}, []string{"corrupt.mmdb"}},
		{"directory", geo.Config{ASNDB: dir}, []error{geo.ErrInvalid}, []string{"not a regular file"}},
		{"both, at once", geo.Config{ASNDB: missing, CountryDB: writeFile(t, dir, "text2.mmdb", []byte("x"))},
			[]error{fs.ErrNotExist, geo.ErrInvalid}, []string{"missing.mmdb", "text2.mmdb"}},
		{"negative interval", geo.Config{CheckInterval: -time.Second}, nil, []string{"CheckInterval"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, err := geo.Open(tt.cfg)
			if err == nil || db != nil {
				t.Fatalf("Open succeeded: %v", db.Describe())
			}
			for _, want := range tt.errs {
				if !errors.Is(err, want) {
					t.Errorf("error %q does not wrap %v", err, want)
				}
			}
			for _, name := range tt.names {
				if !strings.Contains(err.Error(), name) {
					t.Errorf("error %q does not name %q", err, name)
				}
			}
			if strings.Contains(err.Error(), "geo: geo:") {
				t.Errorf("error stutters: %q", err)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, err := geo.Open(geo.Config{
		ASNDB:     geolite2ASN().write(t, dir, "GeoLite2-ASN.mmdb"),
		CountryDB: dbipCountry().write(t, dir, "dbip-country-lite.mmdb"),
	})
	if err != nil {
		t.Fatal(err)
	}
	got := db.Describe()
	if len(got) != 2 {
		t.Fatalf("Describe: %+v", got)
	}
	built := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, want := range []geo.Source{
		{Path: filepath.Join(dir, "GeoLite2-ASN.mmdb"), Role: "ASN", Type: "GeoLite2-ASN", Built: built},
		{Path: filepath.Join(dir, "dbip-country-lite.mmdb"), Role: "country", Type: "DBIP-Country-Lite", Built: built},
	} {
		fi, err := os.Stat(want.Path)
		if err != nil {
			t.Fatal(err)
		}
		want.Bytes = fi.Size()
		if got[i] != want {
			t.Errorf("Describe()[%d] = %+v, want %+v", i, got[i], want)
		}
	}
}

// TestLookupDoesNotAllocate: once a record has been seen, looking up any
// address of its networks allocates nothing.
func TestLookupDoesNotAllocate(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name string
		cfg  geo.Config
	}{
		{"GeoLite2", geo.Config{ASNDB: geolite2ASN().write(t, dir, "asn.mmdb"), CountryDB: geolite2Country().write(t, dir, "country.mmdb")}},
		{"IPinfo Lite", geo.Config{ASNDB: ipinfoLite().write(t, dir, "lite.mmdb"), CountryDB: filepath.Join(dir, "lite.mmdb")}},
	} {
		db, err := geo.Open(tt.cfg)
		if err != nil {
			t.Fatal(err)
		}
		addrs := []netip.Addr{
			netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("::ffff:198.51.100.3"),
			netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("192.0.2.1"),
		}
		for _, a := range addrs {
			db.Lookup(a)
		}
		i := 0
		allocs := testing.AllocsPerRun(1000, func() {
			if db.Lookup(addrs[i%len(addrs)]).ASN == 1 {
				t.Error("impossible ASN")
			}
			i++
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per lookup", tt.name, allocs)
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	dir := b.TempDir()
	split := geo.Config{ASNDB: geolite2ASN().write(b, dir, "asn.mmdb"), CountryDB: geolite2Country().write(b, dir, "country.mmdb")}
	lite := ipinfoLite().write(b, dir, "lite.mmdb")
	shared := geo.Config{ASNDB: lite, CountryDB: lite}
	for _, bm := range []struct {
		name string
		cfg  geo.Config
		addr string
	}{
		{"geolite2-ipv4", split, "203.0.113.7"},
		{"geolite2-ipv6", split, "2001:db8::1"},
		{"geolite2-not-found", split, "192.0.2.1"},
		{"ipinfo-lite-ipv4", shared, "203.0.113.7"},
		{"ipinfo-lite-ipv6", shared, "2001:db8::1"},
	} {
		b.Run(bm.name, func(b *testing.B) {
			db, err := geo.Open(bm.cfg)
			if err != nil {
				b.Fatal(err)
			}
			a := netip.MustParseAddr(bm.addr)
			b.ReportAllocs()
			for b.Loop() {
				db.Lookup(a)
			}
		})
	}
}
