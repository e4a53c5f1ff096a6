package ops

import (
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func TestHashPassword(t *testing.T) {
	t.Parallel()
	h, err := HashPassword([]byte("correct horse"))
	if err != nil || bcrypt.CompareHashAndPassword([]byte(h), []byte("correct horse")) != nil {
		t.Fatalf("%q, %v", h, err)
	}
	if _, err := HashPassword(nil); err == nil {
		t.Error("empty password hashed")
	}
	if _, err := HashPassword([]byte(strings.Repeat("x", 73))); err == nil || !strings.Contains(err.Error(), "72 bytes") {
		t.Errorf("73 bytes: %v", err)
	}
}
