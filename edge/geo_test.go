package edge

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"

	"github.com/maatproxy/maat/edge/config"
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

// TestGeo: with local GeoLite2-style databases, the policy's
// asns:, geoip: and CEL asn/country rules decide on the client's network,
// the fingerprint log carries asn, as_org and country, and a database
// replaced while the edge serves is read again by itself.
func TestGeo(t *testing.T) {
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
	h := newTestHandler(t, "geo: {asn_db: "+asnDB+", country_db: "+countryDB+"}\npolicy: "+pol+"\nlog: {fingerprints: "+fp+"}\n"+
		"sites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	c := handlerClient(h, "h2")
	for _, tt := range []struct {
		path   string
		status int
	}{{"/asn", 403}, {"/country", 403}, {"/cel", 200}, {"/ok", 200}} {
		if res, _ := get(t, c, handlerURL(tt.path), "User-Agent", "Go-http-client/1.1"); res.StatusCode != tt.status {
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

	// Next month's databases arrive while the edge serves, and are read
	// again (through the Server, by SIGHUP and by the file watch:
	// TestGeoReloadThroughServer).
	writeMMDB(t, asnDB, "GeoLite2-ASN", asnRecord(64501, "Other Net"))
	writeMMDB(t, countryDB, "GeoLite2-Country", countryRecord("FR"))
	if err := h.env.Geo.Reload(); err != nil {
		t.Fatal(err)
	}
	if res, _ := get(t, c, handlerURL("/cel"), "User-Agent", "Go-http-client/1.1"); res.StatusCode != 403 {
		t.Errorf("after the replacement: %d, want 403 from the CEL rule", res.StatusCode)
	}
	// A corrupt replacement keeps the database loaded before.
	if err := os.WriteFile(asnDB+".tmp", []byte("not a database"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(asnDB+".tmp", asnDB); err != nil {
		t.Fatal(err)
	}
	if err := h.env.Geo.Reload(); err == nil { // what SIGHUP does
		t.Error("a corrupt database reloaded without an error")
	}
	if res, _ := get(t, c, handlerURL("/cel"), "User-Agent", "Go-http-client/1.1"); res.StatusCode != 403 {
		t.Errorf("after a corrupt replacement: %d, want the last good database to decide (403)", res.StatusCode)
	}
}

// TestGeoReloadThroughServer: the Server reads replaced geo databases
// again by itself, with the file watch it starts, and on a reload of its
// configuration file (what SIGHUP does); the policy's decisions and the
// fingerprint log follow the new data.
func TestGeoReloadThroughServer(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		interval time.Duration // of the file watch
		sighup   bool          // reload the configuration after the replacement
	}{
		{"file watch", 20 * time.Millisecond, false},
		{"SIGHUP", time.Hour, true}, // the watch would not look for an hour
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			asnDB, countryDB := filepath.Join(dir, "asn.mmdb"), filepath.Join(dir, "country.mmdb")
			writeMMDB(t, asnDB, "GeoLite2-ASN", asnRecord(64500, "Example Hosting GmbH"))
			writeMMDB(t, countryDB, "GeoLite2-Country", countryRecord("DE"))
			pol := filepath.Join(dir, "policy.yaml")
			if err := os.WriteFile(pol, []byte(`bots:
  - {name: new-asn, asns: {match: [64501]}, path_regex: ^/asn, action: DENY}
  - {name: new-country, geoip: {countries: [FR]}, path_regex: ^/country, action: DENY}
  - {name: everyone, path_regex: ., action: ALLOW}
`), 0o644); err != nil {
				t.Fatal(err)
			}
			up := echoUpstream(t, "site")
			fp := filepath.Join(dir, "fp.jsonl")
			file := filepath.Join(dir, "edge.yaml")
			if err := os.WriteFile(file, []byte(edgeConfigText("", "geo: {asn_db: "+asnDB+", country_db: "+countryDB+"}\n"+
				"policy: "+pol+"\nlog: {fingerprints: "+fp+"}\nsites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			var logs syncBuffer
			e := startEdgeHooks(t, cfg, testHooks{geoCheckInterval: tt.interval}, &logs)
			c := e.client(t, "h2")
			status := func(path string) int {
				res, _ := get(t, c, e.url(path), "User-Agent", "Go-http-client/1.1")
				return res.StatusCode
			}
			if a, b := status("/asn"), status("/country"); a != 200 || b != 200 {
				t.Fatalf("before the replacement: /asn %d, /country %d, want 200 and 200", a, b)
			}

			writeMMDB(t, asnDB, "GeoLite2-ASN", asnRecord(64501, "Other Net"))
			writeMMDB(t, countryDB, "GeoLite2-Country", countryRecord("FR"))
			if tt.sighup {
				e.ReloadFile(t.Context(), file)
				if a, b := status("/asn"), status("/country"); a != 403 || b != 403 {
					t.Errorf("after the reload: /asn %d, /country %d, want 403 and 403", a, b)
				}
			} else {
				deadline := time.Now().Add(10 * time.Second)
				for status("/asn") != 403 || status("/country") != 403 {
					if time.Now().After(deadline) {
						t.Fatalf("the replaced databases were not read within 10s; log:\n%s", logs.String())
					}
					time.Sleep(20 * time.Millisecond)
				}
				for _, db := range []string{asnDB, countryDB} {
					if !strings.Contains(logs.String(), "msg=geo_reloaded path="+db) {
						t.Errorf("no geo_reloaded line for %s in the log:\n%s", db, logs.String())
					}
				}
			}
			get(t, c, e.url("/after"), "User-Agent", "Go-http-client/1.1")
			if l := waitLine(t, fp, "/after"); l["asn"] != float64(64501) || l.str("as_org") != "Other Net" || l.str("country") != "FR" {
				t.Errorf("logged asn %v as_org %q country %q, want 64501 Other Net FR", l["asn"], l.str("as_org"), l.str("country"))
			}
			if strings.Contains(logs.String(), "level=ERROR") {
				t.Errorf("errors in the log:\n%s", logs.String())
			}
		})
	}
}
