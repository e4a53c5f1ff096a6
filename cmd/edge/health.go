package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

// healthCommand asks a running edge's admin listener whether it is ready:
// the container healthcheck, since the image has no curl.
func healthCommand() *command {
	return &command{
		name: "health", summary: "Ask a running edge's admin listener whether it is ready (/readyz)",
		doc: `Gets http://ADDR/readyz from a running edge's admin listener and exits 0 when
it answers 200, 1 otherwise, printing its answer. For container healthchecks
(the image has no curl) and scripts.`,
		flags: func(fs *flag.FlagSet) func(context.Context, stdio, []string) error {
			addr := fs.String("addr", "127.0.0.1:9100", "the admin listener's address (listen.admin)")
			timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the answer")
			return func(ctx context.Context, s stdio, _ []string) error {
				ctx, cancel := context.WithTimeout(ctx, *timeout)
				defer cancel()
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+*addr+"/readyz", nil)
				if err != nil {
					return err
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					return fmt.Errorf("the admin listener at %s does not answer: %w", *addr, err)
				}
				defer res.Body.Close()
				body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
				s.out.Write(body)
				if res.StatusCode != http.StatusOK {
					return errors.New("not ready: " + res.Status)
				}
				return nil
			}
		},
	}
}
