package geo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// Reload reads every configured file again. Each file that loads serves
// from then on; a file that is missing or invalid keeps its previous
// version serving, and the error (all of them, joined) names it. Lookups
// under way finish on the version they began with.
func (db *DB) Reload() error {
	db.reloadMu.Lock()
	defer db.reloadMu.Unlock()
	return db.reload(db.cfg.files())
}

// reload loads files and swaps in a snapshot that serves each file that
// loaded. The caller holds reloadMu.
func (db *DB) reload(files []file) error {
	next := *db.cur.Load()
	var errs []error
	for _, f := range files {
		src, err := openSource(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		next.set(f, src)
	}
	db.cur.Store(&next)
	return errors.Join(errs...)
}

// Run looks at the files every Config.CheckInterval and reloads each one
// that was replaced or changed (the free databases' updaters rename a new
// file over the old one), until ctx ends; then it returns nil. Each attempt,
// and a file gone missing, is reported once to Config.OnReload. Run blocks:
// the caller runs it in a goroutine it owns.
func (db *DB) Run(ctx context.Context) error {
	t := time.NewTicker(db.cfg.checkInterval())
	defer t.Stop()
	tried := make(map[string]stamp) // the file as last attempted, per path
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		for _, f := range db.cfg.files() {
			db.check(f, tried)
		}
	}
}

// check reloads f if its file differs from both the version serving and
// the version last attempted, and reports the attempt.
func (db *DB) check(f file, tried map[string]stamp) {
	fi, err := os.Stat(f.path)
	now := stampOf(fi, err)
	if now.same(tried[f.path]) || now.same(stampOf(db.loaded(f), nil)) {
		return
	}
	tried[f.path] = now
	if err != nil {
		err = fmt.Errorf("geo: %s database: %w", f.role, err)
	} else {
		db.reloadMu.Lock()
		err = db.reload([]file{f})
		db.reloadMu.Unlock()
	}
	if db.cfg.OnReload != nil {
		db.cfg.OnReload(f.path, err)
	}
}

// loaded returns the file information of the version of f serving now.
func (db *DB) loaded(f file) fs.FileInfo {
	snap := db.cur.Load()
	if f.asn && snap.asn != nil {
		return snap.asn.info
	}
	if f.country && snap.country != nil {
		return snap.country.info
	}
	return nil
}

// stamp identifies a version of a file: the file itself (device and inode,
// so that a file renamed over it differs), its size and modification time;
// or the error that stat gave.
type stamp struct {
	info fs.FileInfo
	err  string
}

func stampOf(fi fs.FileInfo, err error) stamp {
	if err != nil {
		return stamp{err: err.Error()}
	}
	return stamp{info: fi}
}

func (s stamp) same(o stamp) bool {
	if s.info == nil || o.info == nil {
		return s.info == nil && o.info == nil && s.err == o.err && s.err != ""
	}
	return os.SameFile(s.info, o.info) && s.info.Size() == o.info.Size() && s.info.ModTime().Equal(o.info.ModTime())
}

// Source describes a loaded database file, for the log.
type Source struct {
	// Path is the file's path as configured.
	Path string
	// Role is "ASN", "country" or "ASN and country".
	Role string
	// Type is the file's database_type, such as "GeoLite2-ASN",
	// "DBIP-Country-Lite" or "ipinfo lite.mmdb".
	Type string
	// Built is the file's build_epoch.
	Built time.Time
	// Bytes is the file's size.
	Bytes int64
}

// Describe returns the loaded files, ASN first.
func (db *DB) Describe() []Source {
	if db == nil {
		return nil
	}
	snap := db.cur.Load()
	srcs := []*source{snap.asn}
	if snap.country != snap.asn {
		srcs = append(srcs, snap.country)
	}
	var out []Source
	for _, s := range srcs {
		if s == nil {
			continue
		}
		out = append(out, Source{
			Path: s.path, Role: s.role,
			Type:  s.reader.Metadata.DatabaseType,
			Built: s.reader.Metadata.BuildTime().UTC(),
			Bytes: s.info.Size(),
		})
	}
	return out
}
