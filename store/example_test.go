package store_test

import (
	"context"
	"fmt"
	"time"

	"github.com/maatproxy/maat/store"
)

func Example() {
	s := store.NewMemory() // or store.NewRedis(ctx, "redis://127.0.0.1:6379/0")
	defer s.Close()
	ctx := context.Background()

	// A challenge token is accepted once.
	first, _ := s.MarkOnce(ctx, "token:3f9a", 5*time.Minute)
	again, _ := s.MarkOnce(ctx, "token:3f9a", 5*time.Minute)
	fmt.Println("first use:", first, "replay:", again)

	// Two requests a second, bursts of two.
	for range 3 {
		ok, retryAfter, _ := s.Take(ctx, "rate:203.0.113.7", 2, 2)
		fmt.Println("allowed:", ok, "retry after:", retryAfter.Round(100*time.Millisecond))
	}
	// Output:
	// first use: true replay: false
	// allowed: true retry after: 0s
	// allowed: true retry after: 0s
	// allowed: false retry after: 500ms
}
