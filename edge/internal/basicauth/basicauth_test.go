package basicauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func request(user, pass string) *http.Request {
	r := httptest.NewRequest("GET", "/admin/", nil)
	if user != "" {
		r.SetBasicAuth(user, pass)
	}
	return r
}

func TestCheck(t *testing.T) {
	t.Parallel()
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	yes := func(context.Context) bool { return true }
	no := func(context.Context) bool { return false }
	for _, tt := range []struct {
		name       string
		user, pass string
		mayTry     func(context.Context) bool
		want       Result
	}{
		{"no credentials", "", "", yes, Failed},
		{"right", "alice", "s3cret", yes, OK},
		{"wrong password", "alice", "wrong", yes, Failed},
		{"unknown user", "bob", "s3cret", yes, Failed},
		{"limited", "alice", "s3cret", no, Limited},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := New("", map[string]string{"alice": string(hash)})
			if got := a.Check(request(tt.user, tt.pass), NewSlots(), tt.mayTry); got != tt.want {
				t.Errorf("Check = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestCheckRemembers: a verified pair is not limited again (no bcrypt, no
// attempt counted); a wrong one is.
func TestCheckRemembers(t *testing.T) {
	t.Parallel()
	hash, _ := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	a := New("", map[string]string{"alice": string(hash)})
	slots := NewSlots()
	if got := a.Check(request("alice", "s3cret"), slots, func(context.Context) bool { return true }); got != OK {
		t.Fatalf("first Check = %d", got)
	}
	tries := 0
	limit := func(context.Context) bool { tries++; return false }
	if got := a.Check(request("alice", "s3cret"), slots, limit); got != OK || tries != 0 {
		t.Errorf("remembered pair: %d after %d attempts, want OK after none", got, tries)
	}
	if got := a.Check(request("alice", "wrong"), slots, limit); got != Limited || tries != 1 {
		t.Errorf("wrong pair: %d after %d attempts, want Limited after one", got, tries)
	}
}

// TestCheckBusy: with every slot taken, a check whose request ends gives
// up as Busy.
func TestCheckBusy(t *testing.T) {
	t.Parallel()
	hash, _ := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	a := New("", map[string]string{"alice": string(hash)})
	slots := make(Slots) // no slot at all
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := request("alice", "s3cret").WithContext(ctx)
	if got := a.Check(r, slots, func(context.Context) bool { return true }); got != Busy {
		t.Errorf("Check = %d, want Busy", got)
	}
}

func TestChallenge(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ realm, want string }{
		{"", `Basic realm="restricted", charset="UTF-8"`},
		{`Staff "only"`, `Basic realm="Staff 'only'", charset="UTF-8"`},
	} {
		w := httptest.NewRecorder()
		New(tt.realm, nil).Challenge(w)
		if w.Code != 401 || w.Header().Get("WWW-Authenticate") != tt.want || !strings.Contains(w.Body.String(), "401") {
			t.Errorf("realm %q: %d %q", tt.realm, w.Code, w.Header().Get("WWW-Authenticate"))
		}
	}
}
