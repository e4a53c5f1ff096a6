package geo

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Errors of Open, Reload and Config.Validate, besides those of the file
// system (a missing file's error wraps fs.ErrNotExist).
var (
	// ErrInvalid reports a file that is not a usable MaxMind DB: corrupt,
	// truncated, or not an MMDB file at all.
	ErrInvalid = errors.New("geo: invalid MMDB file")
	// ErrTooLarge reports a file larger than MaxFileBytes.
	ErrTooLarge = errors.New("geo: MMDB file too large")
)

// Defaults and bounds.
const (
	// DefaultCheckInterval is how often Run looks for replaced files when
	// Config.CheckInterval is zero. The free databases change monthly or
	// daily; a minute is soon enough and costs two stat calls.
	DefaultCheckInterval = time.Minute
	// MaxFileBytes bounds a database file, which is read into memory whole.
	// The largest free database, IPinfo Lite, is well under it.
	MaxFileBytes = 1 << 30
)

// Config names the database files. The zero value looks nothing up.
type Config struct {
	// ASNDB is the path of an MMDB file that maps addresses to autonomous
	// systems: GeoLite2-ASN, DB-IP's IP to ASN Lite, IPinfo Lite. If empty,
	// lookups give no ASN.
	ASNDB string
	// CountryDB is the path of an MMDB file that maps addresses to
	// countries: GeoLite2-Country (or -City), DB-IP's IP to Country Lite,
	// IPinfo Lite. It may name the same file as ASNDB, which is then read
	// once. If empty, lookups give no country.
	CountryDB string
	// CheckInterval is how often Run looks for a replaced file. If zero,
	// DefaultCheckInterval is used.
	CheckInterval time.Duration
	// OnReload, if not nil, is called by Run from its goroutine after each
	// attempt to load a file that changed (or went missing), with the path
	// and the error, nil on success. Describe tells what is loaded.
	OnReload func(path string, err error)
}

// Validate reports every problem of c at once. It looks at the named files
// (stat) without reading them: each must be a regular file of at most
// MaxFileBytes.
func (c *Config) Validate() error {
	errs := c.problems()
	for _, f := range c.files() {
		fi, err := os.Stat(f.path)
		if err != nil {
			err = fmt.Errorf("geo: %s database: %w", f.role, err)
		} else {
			err = checkFile(fi, f)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// problems returns the problems of c that are not about its files.
func (c *Config) problems() []error {
	var errs []error
	if c.CheckInterval < 0 {
		errs = append(errs, fmt.Errorf("geo: CheckInterval %v is negative", c.CheckInterval))
	}
	return errs
}

func (c *Config) checkInterval() time.Duration {
	if c.CheckInterval > 0 {
		return c.CheckInterval
	}
	return DefaultCheckInterval
}

// file is one database file and the lookups it serves.
type file struct {
	path    string
	role    string // for messages: "ASN", "country" or "ASN and country"
	asn     bool
	country bool
}

// files lists the distinct files of c.
func (c *Config) files() []file {
	switch {
	case c.ASNDB != "" && c.ASNDB == c.CountryDB:
		return []file{{path: c.ASNDB, role: "ASN and country", asn: true, country: true}}
	case c.ASNDB != "" && c.CountryDB != "":
		return []file{{path: c.ASNDB, role: "ASN", asn: true}, {path: c.CountryDB, role: "country", country: true}}
	case c.ASNDB != "":
		return []file{{path: c.ASNDB, role: "ASN", asn: true}}
	case c.CountryDB != "":
		return []file{{path: c.CountryDB, role: "country", country: true}}
	}
	return nil
}

// Info is what the databases say of an address. A field the databases do
// not know is zero.
type Info struct {
	// ASN is the autonomous system's number.
	ASN uint32
	// ASOrg is the autonomous system's organization, as the database
	// spells it.
	ASOrg string
	// Country is the ISO 3166-1 alpha-2 code, upper-case ("DE").
	Country string
}

// DB looks addresses up in the configured databases. It is safe for
// concurrent use, including while Reload or Run swaps in new files.
type DB struct {
	cfg Config
	cur atomic.Pointer[snapshot]

	reloadMu sync.Mutex // serializes Reload and Run's reloads
}

// snapshot is the set of sources in use; a reload stores a new one.
type snapshot struct {
	asn, country *source // nil when off; the same source for one shared file
}

// Open validates cfg, reads the named files into memory, verifies them,
// and returns a DB that looks addresses up in them. It reports every
// problem at once, Validate's and those of the files' contents; each error
// names the file and wraps ErrInvalid, ErrTooLarge or the file system's
// error.
func Open(cfg Config) (*DB, error) {
	db := &DB{cfg: cfg}
	var snap snapshot
	errs := cfg.problems()
	for _, f := range cfg.files() { // openSource checks what Validate does, and more
		src, err := openSource(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		snap.set(f, src)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	db.cur.Store(&snap)
	return db, nil
}

// set makes src serve f's lookups.
func (s *snapshot) set(f file, src *source) {
	if f.asn {
		s.asn = src
	}
	if f.country {
		s.country = src
	}
}

// Lookup returns what the databases say of addr; the zero Info for an
// address they do not hold, an invalid address or a nil DB. An
// IPv4-mapped IPv6 address is looked up as IPv4. Repeated lookups of
// addresses in the same network do not allocate.
func (db *DB) Lookup(addr netip.Addr) Info {
	if db == nil || !addr.IsValid() {
		return Info{}
	}
	addr = addr.Unmap().WithZone("")
	snap := db.cur.Load()
	var info Info
	if snap.asn != nil {
		r := snap.asn.lookup(addr)
		info.ASN, info.ASOrg = r.asn, r.org
		if snap.country == snap.asn {
			info.Country = r.country
			return info
		}
	}
	if snap.country != nil {
		info.Country = snap.country.lookup(addr).country
	}
	return info
}
