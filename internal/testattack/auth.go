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
// as the last try is answered, if later) for p.AuthFor.
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
			tick := time.NewTicker(p.AuthEvery)
			defer tick.Stop()
			for n := 0; ctx.Err() == nil; n++ {
				req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+t.HTTPS+t.AuthPath, nil)
				req.Host = t.Host
				req.Header.Set("User-Agent", "curl/8.5.0")
				req.SetBasicAuth(AuthUser, fmt.Sprintf("wrong-%d-%d", i, n))
				start := time.Now()
				res, err := tr.RoundTrip(req)
				if ctx.Err() != nil {
					return // the flood is over; an answer cut short is not counted
				}
				if err != nil {
					out.Answers.Add(errKind(err), 1)
				} else {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					out.Answers.Add(strconv.Itoa(res.StatusCode), 1)
					tries.add(time.Since(start))
				}
				select {
				case <-tick.C:
				case <-ctx.Done():
				}
			}
		})
	}
	wg.Wait()
	out.Held = p.AuthClients
	out.Note("%d tries answered in %v s", out.Answers.Total(), p.AuthFor.Seconds())
	if s := tries.String(); s != "" {
		out.Note("each answered in %s", s)
	}
	return nil
}
