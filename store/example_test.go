package store_test

import (
	"context"
	"fmt"
	"log"
	"sync"
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

// A node that shares marks and counters through Redis, and keeps serving
// from memory while Redis is away. (Not run: it needs a Redis server.)
func ExampleNewResilient() {
	r, err := store.OpenRedis("redis://127.0.0.1:6379/0") // no I/O: Redis may be down at start
	if err != nil {
		log.Fatal(err)
	}
	s, err := store.NewResilient(r, store.NewMemory(), store.ResilientConfig{
		OnStateChange: func(degraded bool, err error) {
			if degraded {
				log.Printf("store degraded: %v", err)
			} else {
				log.Print("store recovered")
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(ctx) }) // probes, reports, recovers
	defer func() { stop(); wg.Wait() }()

	first, err := s.MarkOnce(ctx, "token:3f9a", 5*time.Minute) // never fails because Redis is down
	fmt.Println(first, err)
	if ok, since, err := s.Health(); !ok {
		fmt.Printf("degraded since %v: %v\n", since, err)
	}
}

// Blobs sealed with a key every node derives from the shared secret: the
// store underneath (Redis) holds no key in the clear.
func ExampleNewSealed() {
	key := make([]byte, store.SealKeySize) // in the edge: HMAC-SHA-256(secret, "store-seal v1")
	s, err := store.NewSealed(store.NewMemory(), store.SealConfig{
		Key:     key,
		OnError: func(key string, err error) { log.Print(err) },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	_ = s.Put(ctx, "certs:example.org", []byte("-----BEGIN EC PRIVATE KEY-----\n…"))
	b, err := s.Get(ctx, "certs:example.org")
	fmt.Printf("%.30s %v\n", b, err)
	// Output:
	// -----BEGIN EC PRIVATE KEY----- <nil>
}
