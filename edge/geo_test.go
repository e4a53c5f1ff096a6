package edge

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// writeMMDB writes a small MMDB of the given type, mapping 127.0.0.0/8 to
// data, and installs it at path by rename, as the monthly updates are.
func writeMMDB(t *testing.T, path, dbType string, data mmdbtype.Map) {
	t.Helper()
	w, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: dbType, IncludeReservedNetworks: true, BuildEpoch: time.Now().Unix()})
	if err != nil {
		t.Fatal(err)
	}
	_, n, _ := net.ParseCIDR("127.0.0.0/8")
	if err := w.Insert(n, data); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func asnRecord(asn uint32, org string) mmdbtype.Map {
	return mmdbtype.Map{"autonomous_system_number": mmdbtype.Uint32(asn), "autonomous_system_organization": mmdbtype.String(org)}
}

func countryRecord(code string) mmdbtype.Map {
	return mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String(code)}}
}

// TestGeoThroughEdge: with local GeoLite2-style databases, the policy's
// asns:, geoip: and CEL asn/country rules decide on the client's network,
// the fingerprint log carries asn, as_org and country, and a database
// replaced while the edge serves is read again by itself.
func TestGeoThroughEdge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	asnDB, countryDB := filepath.Join(dir, "asn.mmdb"), filepath.Join(dir, "country.mmdb")
	writeMMDB(t, asnDB, "GeoLite2-ASN", asnRecord(64500, "Example Hosting GmbH"))
	writeMMDB(t, countryDB, "GeoLite2-Country", countryRecord("DE"))
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte(`bots:
  - {name: block-asn, asns: {match: [64500]}, path_regex: ^/asn, action: DENY}
  - {name: block-country, geoip: {countries: [DE]}, path_regex: ^/country, action: DENY}
  - {name: cel, expression: 'asn == 64501 && country == "FR"', path_regex: ^/cel, action: DENY}
  - {name: everyone, path_regex: ., action: ALLOW}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	up := echoUpstream(t, "site")
	fp := filepath.Join(dir, "fp.jsonl")
	e := startEdge(t, "geo: {asn_db: "+asnDB+", country_db: "+countryDB+"}\npolicy: "+pol+"\nlog: {fingerprints: "+fp+"}\n"+
		"sites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	c := e.client(t, "h2")
	for _, tt := range []struct {
		path   string
		status int
	}{{"/asn", 403}, {"/country", 403}, {"/cel", 200}, {"/ok", 200}} {
		if res, _ := get(t, c, e.url(tt.path), "User-Agent", "curl/8.5.0"); res.StatusCode != tt.status {
			t.Errorf("%s: %d, want %d", tt.path, res.StatusCode, tt.status)
		}
	}
	l := waitLine(t, fp, "/ok")
	if l["asn"] != float64(64500) || l.str("as_org") != "Example Hosting GmbH" || l.str("country") != "DE" {
		t.Errorf("logged asn %v as_org %q country %q", l["asn"], l.str("as_org"), l.str("country"))
	}
	if rules := waitLine(t, fp, "/asn").rules(); len(rules) == 0 || rules[0] != "block-asn" {
		t.Errorf("/asn decided by %v", rules)
	}

	// Next month's databases arrive while the edge serves, and SIGHUP
	// reads them (the watcher would too, within geo's check interval; the
	// geo package tests it).
	writeMMDB(t, asnDB, "GeoLite2-ASN", asnRecord(64501, "Other Net"))
	writeMMDB(t, countryDB, "GeoLite2-Country", countryRecord("FR"))
	if err := e.Server.env.Geo.Reload(); err != nil {
		t.Fatal(err)
	}
	if res, _ := get(t, c, e.url("/cel"), "User-Agent", "curl/8.5.0"); res.StatusCode != 403 {
		t.Errorf("after the replacement: %d, want 403 from the CEL rule", res.StatusCode)
	}
	// A corrupt replacement keeps the database loaded before.
	if err := os.WriteFile(asnDB+".tmp", []byte("not a database"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(asnDB+".tmp", asnDB); err != nil {
		t.Fatal(err)
	}
	if err := e.Server.env.Geo.Reload(); err == nil { // what SIGHUP does
		t.Error("a corrupt database reloaded without an error")
	}
	if res, _ := get(t, c, e.url("/cel"), "User-Agent", "curl/8.5.0"); res.StatusCode != 403 {
		t.Errorf("after a corrupt replacement: %d, want the last good database to decide (403)", res.StatusCode)
	}
}
