package secret

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestReadOrMake: a first call makes the secret (0600, its directory
// made), later ones read it; of callers racing to make it, all get one
// secret.
func TestReadOrMake(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state", "secret")
	got := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			b, err := ReadOrMake(path)
			if err != nil {
				t.Error(err)
			}
			got[i] = b
		})
	}
	wg.Wait()
	for _, b := range got {
		if len(b) != 32 || !bytes.Equal(b, got[0]) {
			t.Fatalf("racing callers got %x and %x", got[0], b)
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("secret file: %v, %v; want mode 0600", fi, err)
	}
	again, err := ReadOrMake(path)
	if err != nil || !bytes.Equal(again, got[0]) {
		t.Errorf("read again: %x, %v", again, err)
	}
}

func TestShort(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte("SHORT"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"ReadOrMake": func() error { _, err := ReadOrMake(path); return err }(),
		"Check":      Check(path, func(string) error { return nil }),
	} {
		if short, ok := errors.AsType[*ShortError](err); !ok || short.Len != 5 {
			t.Errorf("%s: %v, want a ShortError of 5 bytes", name, err)
		}
	}
}

func TestCheckMakesNothing(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(dir, "secret")
	if err := Check(path, func(string) error { return nil }); err != nil {
		t.Error(err)
	}
	no := errors.New("read-only")
	if err := Check(path, func(string) error { return no }); !errors.Is(err, no) {
		t.Errorf("unmakeable: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Check made %s: %v", dir, err)
	}
}

func TestDerive(t *testing.T) {
	t.Parallel()
	s := []byte("0123456789abcdef0123456789abcdef")
	a, b := Derive(s, "a"), Derive(s, "b")
	if len(a) != 32 || bytes.Equal(a, b) || !bytes.Equal(a, Derive(s, "a")) {
		t.Errorf("Derive: %x, %x", a, b)
	}
}
