package geo

import (
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"sync"

	"github.com/oschwald/maxminddb-golang/v2"
)

// maxRecords bounds the decoded records a source keeps, far above the
// distinct records of the free databases (GeoLite2-ASN has about 80,000);
// past it, lookups of records not yet kept decode (and allocate) each time.
const maxRecords = 1 << 20

// source is one database file, read into memory and verified. Nothing
// closes it: a source that a reload replaced is garbage-collected once no
// lookup uses it.
type source struct {
	path, role string
	info       fs.FileInfo // of the file as it was read
	reader     *maxminddb.Reader
	ipv4Only   bool

	mu      sync.RWMutex
	records map[uintptr]record // by data-section offset: one entry per distinct record
}

// record is what a lookup keeps of a database record.
type record struct {
	asn     uint32
	org     string
	country string
}

// openSource reads f's file whole (it was checked to be at most
// MaxFileBytes), opens it as a MaxMind DB and verifies its search tree and
// data section, so that a corrupt file fails here and not in a lookup.
func openSource(f file) (*source, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return nil, fmt.Errorf("geo: %s database: %w", f.role, err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("geo: %s database: %w", f.role, err)
	}
	if err := checkFile(fi, f); err != nil {
		return nil, err
	}
	b := make([]byte, fi.Size())
	if _, err := io.ReadFull(fh, b); err != nil {
		return nil, fmt.Errorf("geo: %s database %s: reading %d bytes: %w", f.role, f.path, fi.Size(), err)
	}
	r, err := maxminddb.OpenBytes(b)
	if err == nil {
		err = verify(r)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s database %s: %w", ErrInvalid, f.role, f.path, err)
	}
	return &source{
		path: f.path, role: f.role, info: fi, reader: r,
		ipv4Only: r.Metadata.IPVersion == 4,
		records:  make(map[uintptr]record),
	}, nil
}

// verify checks the whole search tree (every node reached once, no cycle)
// and data section of r, and its metadata. maxminddb's Verify also insists
// on a description, which the format leaves optional and some third-party
// databases omit; for them it is given a placeholder while Verify runs.
func verify(r *maxminddb.Reader) error {
	if len(r.Metadata.Description) > 0 {
		return r.Verify()
	}
	r.Metadata.Description = map[string]string{"en": "(none)"}
	defer func() { r.Metadata.Description = nil }()
	return r.Verify()
}

// checkFile checks that fi is a regular file of at most MaxFileBytes.
func checkFile(fi fs.FileInfo, f file) error {
	switch {
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%w: %s database %s is not a regular file", ErrInvalid, f.role, f.path)
	case fi.Size() > MaxFileBytes:
		return fmt.Errorf("%w: %s database %s has %d bytes, more than %d", ErrTooLarge, f.role, f.path, fi.Size(), MaxFileBytes)
	}
	return nil
}

// lookup returns the record of a (unmapped, without zone). A record is
// decoded once and then served from s.records.
func (s *source) lookup(a netip.Addr) record {
	if s.ipv4Only && !a.Is4() {
		return record{}
	}
	res := s.reader.Lookup(a)
	if !res.Found() {
		return record{}
	}
	off := res.Offset()
	s.mu.RLock()
	r, ok := s.records[off]
	s.mu.RUnlock()
	if ok {
		return r
	}
	r = decodeRecord(res)
	s.mu.Lock()
	if len(s.records) < maxRecords {
		s.records[off] = r
	}
	s.mu.Unlock()
	return r
}

// decodeRecord decodes the record res found. (A function of its own, so
// that the record whose address Decode takes is not moved to the heap on
// lookup's path.)
func decodeRecord(res maxminddb.Result) record {
	var r record
	if err := res.Decode(&r); err != nil {
		// Verify passed, so the record is sound but not of a shape we
		// read: nothing to say about the address.
		return record{}
	}
	return r
}
