package edge

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestGroupSurfacesErrors: a goroutine's error is signalled on failed as
// soon as it returns, under its name, and Wait returns every error once
// every goroutine is done; goroutines that end without an error signal
// nothing.
func TestGroupSurfacesErrors(t *testing.T) {
	t.Parallel()
	errA, errB := errors.New("a broke"), errors.New("b broke")
	for _, tt := range []struct {
		name string
		errs []error // one goroutine each
		want []error
	}{
		{"none fails", []error{nil, nil}, nil},
		{"one fails", []error{nil, errA}, []error{errA}},
		{"two fail", []error{errA, errB}, []error{errA, errB}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := newGroup()
			release := make(chan struct{})
			for i, err := range tt.errs {
				g.Go(fmt.Sprint("part", i), func() error {
					if err == nil {
						<-release // the healthy ones keep running
					}
					return err
				})
			}
			if tt.want != nil {
				select {
				case <-g.failed:
				case <-time.After(10 * time.Second):
					t.Fatal("a goroutine's error was not signalled on failed")
				}
				if err := g.err(); err == nil {
					t.Error("failed was signalled but err() is nil")
				}
			}
			close(release)
			err := g.Wait()
			select {
			case <-g.failed:
				if tt.want == nil {
					t.Error("failed was signalled without an error")
				}
			default:
				if tt.want != nil {
					t.Error("failed not signalled after Wait")
				}
			}
			if (err == nil) != (tt.want == nil) {
				t.Fatalf("Wait = %v, want errors %v", err, tt.want)
			}
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("Wait = %v, lacks %v", err, w)
				}
			}
			if tt.want != nil && !strings.HasPrefix(err.Error(), "part") {
				t.Errorf("Wait = %v: the failing goroutine is not named", err)
			}
		})
	}
}
