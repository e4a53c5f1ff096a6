// Package secret keeps the nodes' shared secret in a file and derives a
// key from it for each purpose. ReadOrMake reads the file, or makes it on
// a first start (32 random bytes, mode 0600), so that what the secret
// keys (pass cookies, hashed client addresses, values sealed in the
// store) survives a restart; Check says what ReadOrMake would do, making
// nothing; Derive gives each purpose a key of its own (HMAC-SHA256).
//
// Where the file is, and what a node does without one, is the caller's
// (edge reads it from the configuration and logs the cost). secret
// imports only the leaf challenge, for the shortest secret it accepts.
package secret

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/maatproxy/maat/challenge"
)

// A ShortError is a secret file too short to key anything.
type ShortError struct {
	Path string
	Len  int // bytes the file holds
}

func (e *ShortError) Error() string {
	return fmt.Sprintf("secret file %s holds %d bytes, want at least %d (delete it to have a new one made)", e.Path, e.Len, challenge.MinSecretLen)
}

// ReadOrMake reads the secret at path, or makes it (32 random bytes, mode
// 0600, its directory 0700 if missing). Of nodes or processes racing to
// make it, one wins and the others read its secret. A file shorter than
// challenge.MinSecretLen is a *ShortError.
func ReadOrMake(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if len(b) < challenge.MinSecretLen {
			return nil, &ShortError{Path: path, Len: len(b)}
		}
		return b, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("secret file: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("secret file: %w", err)
	}
	// Written whole under another name, then linked into place: a reader
	// never sees a partial secret, and Link fails if another was first.
	f, err := os.CreateTemp(filepath.Dir(path), ".secret-*")
	if err != nil {
		return nil, fmt.Errorf("secret file: %w", err)
	}
	defer os.Remove(f.Name())
	b = make([]byte, 32)
	_, _ = rand.Read(b)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("secret file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("secret file: %w", err)
	}
	if err := os.Link(f.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return ReadOrMake(path)
		}
		return nil, fmt.Errorf("secret file: %w", err)
	}
	return b, nil
}

// Check checks what ReadOrMake would do with path, making nothing: a file
// there must be long enough (else a *ShortError); a missing one must be
// makeable, which canMake says of its directory.
func Check(path string, canMake func(dir string) error) error {
	b, err := os.ReadFile(path)
	switch {
	case err == nil && len(b) < challenge.MinSecretLen:
		return &ShortError{Path: path, Len: len(b)}
	case err == nil:
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("secret file: %w", err)
	}
	if err := canMake(filepath.Dir(path)); err != nil {
		return fmt.Errorf("secret file %s cannot be made: %w", path, err)
	}
	return nil
}

// Derive returns a key for one purpose from the shared secret.
func Derive(secret []byte, purpose string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}
