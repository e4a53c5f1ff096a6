package fplog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// Errors of Files and Find.
var (
	// ErrNoLog is returned by Files when neither the log file nor any
	// rotated file of it exists.
	ErrNoLog = errors.New("fplog: no log file")
	// ErrNotFound is returned by Find when no record has the request ID.
	ErrNotFound = errors.New("fplog: no record with this request ID")
)

// Files returns the log file at path and the files rotated from it, the
// newest first: path itself, if it exists, then the rotated files from the
// latest rotation to the oldest. Of a rotation whose file is both plain and
// gzipped (the compressor is at work), only the gzipped file is listed: it
// is complete once it exists. If none of them exists, the error wraps
// ErrNoLog and fs.ErrNotExist.
func Files(path string) ([]string, error) {
	var files []string
	switch info, err := os.Stat(path); {
	case err == nil && info.IsDir():
		return nil, fmt.Errorf("fplog: %s is a directory, not a log file", path)
	case err == nil:
		files = append(files, path)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("fplog: %w", err)
	}
	byTime, times, err := rotatedFiles(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("fplog: %w", err)
	}
	for _, ts := range slices.Backward(times) {
		names := byTime[ts]
		i := slices.IndexFunc(names, func(n string) bool { return strings.HasSuffix(n, ".gz") })
		if i < 0 {
			i = 0
		}
		files = append(files, names[i])
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: %s (nor rotated files of it): %w", ErrNoLog, path, fs.ErrNotExist)
	}
	return files, nil
}

// Found is what Find found: the record, where, and what it skipped.
type Found struct {
	Record Record
	// File and Line locate the record: a name given to Find and the
	// line's number in it (of the uncompressed text), from 1.
	File string
	Line int64
	// Bad counts the lines skipped in the files read: not JSON, or
	// longer than MaxLineBytes.
	Bad int64
	// Read counts the files read, Missing those that had gone (removed
	// by rotation between listing and reading).
	Read, Missing int
}

// Find reads files in order, as a stream (plain or gzip, one bounded line
// at a time), and returns the first record whose request_id is id. Lines
// that are not records are counted in Found.Bad and skipped; a file that
// no longer exists is counted in Found.Missing (a plain file is looked
// for gzipped first: the compressor may have taken it). If no record has the ID,
// the error wraps ErrNotFound, and Found says what was read. Any other
// error is the reading's.
func Find(ctx context.Context, files []string, id string) (Found, error) {
	var f Found
	if id == "" {
		return f, fmt.Errorf("%w: the ID is empty", ErrNotFound)
	}
	for _, name := range files {
		if err := ctx.Err(); err != nil {
			return f, err
		}
		ok, err := f.findIn(name, id)
		if errors.Is(err, fs.ErrNotExist) && !strings.HasSuffix(name, ".gz") {
			// Compressed since it was listed: name.gz is the same file.
			ok, err = f.findIn(name+".gz", id)
		}
		if errors.Is(err, fs.ErrNotExist) {
			f.Missing++
			continue
		}
		if err != nil {
			return f, err
		}
		f.Read++
		if ok {
			return f, nil
		}
	}
	return f, fmt.Errorf("%w: %q (%d files read)", ErrNotFound, id, f.Read)
}

// findIn reads one file for Find.
func (f *Found) findIn(name, id string) (bool, error) {
	file, err := os.Open(name)
	if err != nil {
		return false, fmt.Errorf("fplog: %w", err)
	}
	defer file.Close()
	ok, err := f.findInReader(file, name, id)
	if err != nil {
		return false, fmt.Errorf("%w (%s)", err, name)
	}
	return ok, nil
}

// findInReader reads r, plain or gzip, for Find.
func (f *Found) findInReader(r io.Reader, name, id string) (bool, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return false, fmt.Errorf("fplog: gzip: %w", err)
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 64<<10)
	}
	// JSON may escape <, > and & in a value: such an ID is looked for in
	// every parsed line, others first as bytes.
	needle := []byte(id)
	if strings.ContainsAny(id, "<>&") {
		needle = nil
	}
	var n int64
	found := false
	err := readLines(br, func(b []byte, tooLong bool) bool {
		n++
		b = bytes.TrimSpace(b)
		switch {
		case len(b) == 0:
			return true
		case tooLong:
			f.Bad++
			return true
		case needle != nil && !bytes.Contains(b, needle):
			if !json.Valid(b) {
				f.Bad++
			}
			return true
		}
		rec, err := ParseLine(b)
		if err != nil {
			f.Bad++
			return true
		}
		if rec.RequestID != id {
			return true
		}
		f.Record, f.File, f.Line, found = rec, name, n, true
		return false
	})
	return found, err
}
