package geo_test

import (
	"context"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/maatproxy/maat/geo"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// nextMonth is geolite2ASN as its next release: another organization for
// 203.0.113.0/24.
func nextMonth() testDB {
	d := geolite2ASN()
	d.built += 30 * 86400
	d.nets[v4a] = mmdbtype.Map{"autonomous_system_number": u32(64510), "autonomous_system_organization": s("Renamed Transit AG")}
	return d
}

var (
	a7         = netip.MustParseAddr("203.0.113.7")
	infoA7     = geo.Info{ASN: 64500, ASOrg: "Example Transit GmbH"}
	infoA7Next = geo.Info{ASN: 64510, ASOrg: "Renamed Transit AG"}
)

// TestReload: a replaced file serves after Reload; a corrupt or missing one
// gives an error naming it and the previous version keeps serving.
func TestReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := geolite2ASN().write(t, dir, "asn.mmdb")
	db, err := geo.Open(geo.Config{ASNDB: path})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name    string
		replace func()
		err     error
		want    geo.Info
	}{
		{"unchanged", func() {}, nil, infoA7},
		{"corrupt", func() { writeFile(t, dir, "asn.mmdb", []byte("<html>502 Bad Gateway</html>")) }, geo.ErrInvalid, infoA7},
		{"missing", func() { os.Remove(path) }, fs.ErrNotExist, infoA7},
		{"next month", func() { nextMonth().write(t, dir, "asn.mmdb") }, nil, infoA7Next},
	}
	for _, st := range steps {
		st.replace()
		err := db.Reload()
		if !errors.Is(err, st.err) || (err == nil) != (st.err == nil) {
			t.Fatalf("%s: Reload: %v, want %v", st.name, err, st.err)
		}
		if err != nil && !strings.Contains(err.Error(), path) {
			t.Errorf("%s: the error %q does not name the file", st.name, err)
		}
		if got := db.Lookup(a7); got != st.want {
			t.Errorf("%s: Lookup = %+v, want %+v", st.name, got, st.want)
		}
	}
	if got := db.Describe()[0].Built; !got.Equal(time.Unix(nextMonth().built, 0)) {
		t.Errorf("Describe after reload: built %v", got)
	}
}

// TestReloadOneOfTwo: each file reloads on its own; a bad one does not hold
// back the good one.
func TestReloadOneOfTwo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := geo.Config{ASNDB: geolite2ASN().write(t, dir, "asn.mmdb"), CountryDB: geolite2Country().write(t, dir, "country.mmdb")}
	db, err := geo.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nextMonth().write(t, dir, "asn.mmdb")
	writeFile(t, dir, "country.mmdb", []byte("truncated"))
	err = db.Reload()
	if !errors.Is(err, geo.ErrInvalid) || !strings.Contains(err.Error(), "country.mmdb") || strings.Contains(err.Error(), "asn.mmdb") {
		t.Fatalf("Reload: %v", err)
	}
	want := infoA7Next
	want.Country = "DE"
	if got := db.Lookup(a7); got != want {
		t.Errorf("Lookup = %+v, want %+v", got, want)
	}
}

// TestReloadWhileServing: lookups from several goroutines while the file is
// replaced and reloaded again and again always see one whole version.
func TestReloadWhileServing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	versions := [][]byte{geolite2ASN().bytes(t), nextMonth().bytes(t)}
	path := writeFile(t, dir, "asn.mmdb", versions[0])
	db, err := geo.Open(geo.Config{ASNDB: path, CountryDB: path})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[geo.Info]int{}
	for range 4 {
		wg.Go(func() {
			local := map[geo.Info]int{}
			for {
				select {
				case <-stop:
					mu.Lock()
					for k, v := range local {
						seen[k] += v
					}
					mu.Unlock()
					return
				default:
				}
				local[db.Lookup(a7)]++
				if got := db.Lookup(netip.MustParseAddr("2001:db8::1")); got.ASN != 64502 {
					t.Errorf("IPv6 lookup during reload: %+v", got)
				}
			}
		})
	}
	for i := range 20 {
		writeFile(t, dir, "asn.mmdb", versions[(i+1)%2])
		if err := db.Reload(); err != nil {
			t.Error(err)
		}
		if got, want := db.Lookup(a7), []geo.Info{infoA7, infoA7Next}[(i+1)%2]; got != want {
			t.Errorf("after reload %d: Lookup = %+v, want %+v", i, got, want)
		}
	}
	close(stop)
	wg.Wait()
	total := 0
	for info, n := range seen {
		total += n
		if info != infoA7 && info != infoA7Next {
			t.Errorf("a lookup during reload saw %+v (%d times)", info, n)
		}
	}
	if total == 0 {
		t.Error("no lookup ran during the reloads")
	}
}

// TestRun: Run notices a file renamed over the old one at the next check,
// reports each attempt once, keeps the old version when the new one is bad,
// and returns when its context ends.
func TestRun(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		path := geolite2ASN().write(t, dir, "asn.mmdb")
		var mu sync.Mutex // Run's goroutine reports, the test reads
		var reports []error
		db, err := geo.Open(geo.Config{ASNDB: path, CheckInterval: time.Minute, OnReload: func(p string, err error) {
			if p != path {
				t.Errorf("OnReload for %s", p)
			}
			mu.Lock()
			reports = append(reports, err)
			mu.Unlock()
		}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- db.Run(ctx) }()

		tick := func() {
			time.Sleep(time.Minute)
			synctest.Wait()
		}
		steps := []struct {
			name    string
			replace func()
			report  bool
			err     error
			want    geo.Info
		}{
			{"unchanged", func() {}, false, nil, infoA7},
			{"next month", func() { nextMonth().write(t, dir, "asn.mmdb") }, true, nil, infoA7Next},
			{"still next month", func() {}, false, nil, infoA7Next},
			{"half written", func() { writeFile(t, dir, "asn.mmdb", geolite2ASN().bytes(t)[:100]) }, true, geo.ErrInvalid, infoA7Next},
			{"still half written", func() {}, false, nil, infoA7Next},
			{"deleted", func() { os.Remove(path) }, true, fs.ErrNotExist, infoA7Next},
			{"still deleted", func() {}, false, nil, infoA7Next},
			{"back", func() { geolite2ASN().write(t, dir, "asn.mmdb") }, true, nil, infoA7},
		}
		for _, st := range steps {
			mu.Lock()
			reports = nil
			mu.Unlock()
			st.replace()
			tick()
			mu.Lock()
			reports := reports
			mu.Unlock()
			if len(reports) != map[bool]int{false: 0, true: 1}[st.report] {
				t.Fatalf("%s: reports %v", st.name, reports)
			}
			if st.report && (!errors.Is(reports[0], st.err) || (reports[0] == nil) != (st.err == nil)) {
				t.Errorf("%s: reported %v, want %v", st.name, reports[0], st.err)
			}
			if got := db.Lookup(a7); got != st.want {
				t.Errorf("%s: Lookup = %+v, want %+v", st.name, got, st.want)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v", err)
		}
	})
}

func TestValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := geolite2ASN().write(t, dir, "asn.mmdb")
	missing := filepath.Join(dir, "nope.mmdb")
	for _, tt := range []struct {
		name string
		cfg  geo.Config
		errs int
	}{
		{"zero", geo.Config{}, 0},
		{"good", geo.Config{ASNDB: good, CountryDB: good, CheckInterval: time.Hour}, 0},
		{"missing", geo.Config{CountryDB: missing}, 1},
		{"directory", geo.Config{ASNDB: dir}, 1},
		{"all at once", geo.Config{ASNDB: dir, CountryDB: missing, CheckInterval: -1}, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			n := 0
			if err != nil {
				n = len(err.(interface{ Unwrap() []error }).Unwrap())
			}
			if n != tt.errs {
				t.Errorf("Validate: %v; want %d problems", err, tt.errs)
			}
		})
	}
}
