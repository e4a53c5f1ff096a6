package testattack

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// authFlood has p.AuthClients clients, each from its own address, try a
// wrong password for AuthUser on t.AuthPath every p.AuthEvery (or as soon
// as the last try is answered, if later) for p.AuthFor. Meanwhile, if
// t.AuthPassword is set, an honest user at 127.0.0.1 logs in with it twice
// a second.
func authFlood(ctx context.Context, t Target, p Params, out *Outcome) error {
	if t.AuthPath == "" {
		return fmt.Errorf("testattack: the target has no path behind basic auth")
	}
	ctx, cancel := context.WithTimeout(ctx, p.AuthFor)
	defer cancel()
	var wg sync.WaitGroup
	var tries spread
	for i := range p.AuthClients {
		wg.Go(func() {
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: source(blockAuth, i)}, Timeout: 10 * time.Second}
			tr := &http.Transport{DialContext: d.DialContext, TLSClientConfig: t.attackTLS("http/1.1"),
				TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
			defer tr.CloseIdleConnections()
			pace(ctx, p.AuthEvery, func(n int) {
				if k, took, ok := t.login(ctx, tr, t.AuthPath, fmt.Sprintf("wrong-%d-%d", i, n)); ok {
					out.Answers.Add(k, 1)
					if took > 0 {
						tries.add(took)
					}
				}
			})
		})
	}
	var honest Tally
	var logins spread
	if t.AuthPassword != "" {
		wg.Go(func() {
			tr := &http.Transport{TLSClientConfig: t.tlsConfig("http/1.1")}
			defer tr.CloseIdleConnections()
			pace(ctx, 500*time.Millisecond, func(int) {
				if k, took, ok := t.login(ctx, tr, t.AuthPath+"honest/", t.AuthPassword); ok {
					honest.Add(k, 1)
					logins.add(took)
				}
			})
		})
	}
	wg.Wait()
	out.Held = p.AuthClients
	out.Note("%d tries answered in %v s", out.Answers.Total(), p.AuthFor.Seconds())
	if s := tries.String(); s != "" {
		out.Note("each answered in %s", s)
	}
	if honest.Total() > 0 {
		out.Note("the honest user's logins: %s, answered in %s", honest.String(), logins.String())
	}
	return nil
}

// pace calls f(0), f(1), … every every (or as soon as the last call
// returned, if later) until ctx ends.
func pace(ctx context.Context, every time.Duration, f func(n int)) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for n := 0; ctx.Err() == nil; n++ {
		f(n)
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
}

// login asks for path as AuthUser with password and returns what the edge
// answered and how long it took (0 for a failure); ok is false when ctx
// ended first, and the answer does not count.
func (t Target) login(ctx context.Context, tr *http.Transport, path, password string) (kind string, took time.Duration, ok bool) {
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+t.HTTPS+path, nil)
	req.Host = t.Host
	req.Header.Set("User-Agent", "Go-http-client/1.1")
	req.SetBasicAuth(AuthUser, password)
	start := time.Now()
	res, err := tr.RoundTrip(req)
	if ctx.Err() != nil {
		if err == nil {
			res.Body.Close()
		}
		return "", 0, false
	}
	if err != nil {
		return errKind(err), 0, true
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return strconv.Itoa(res.StatusCode), time.Since(start), true
}
