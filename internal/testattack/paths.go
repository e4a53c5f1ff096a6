package testattack

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// Spellings returns request targets that common upstreams (PHP, Tomcat,
// Node, IIS, a static server on a case-insensitive disk) read as a place
// under prefix ("/admin/", one segment), or as prefix without its slash,
// spelled so that a rule matching prefix as written misses them (issue
// 33). None holds "/honest/".
func Spellings(prefix string) []string {
	name := strings.Trim(prefix, "/")
	upper, title := strings.ToUpper(name), strings.ToUpper(name[:1])+name[1:]
	var fullwidth strings.Builder
	for _, r := range name {
		if r >= '!' && r <= '~' {
			r += 0xff01 - '!'
		}
		fullwidth.WriteRune(r)
	}
	var out []string
	for _, p := range []string{
		"/" + upper + "/", "/" + title + "/", "/" + name, "/" + name + ";x/", "/;/" + name + "/", "/x/..;/" + name + "/",
		"/" + name + "./", "/" + name + "%20/", "/%c0%af" + name + "/", "/%e0%80%af" + name + "/",
		"/%2e%2e/" + name + "/", "/x/%252e%252e/" + name + "/", "/" + name + "%2f", "/" + name + "%252f",
		"//" + name + "/", "/./" + name + "/", fmt.Sprintf("/%%%02X%s/", name[0], name[1:]),
		fmt.Sprintf("/%%25%02X%s/", name[0], name[1:]), "/" + fullwidth.String() + "/",
		"/" + name + "::$INDEX_ALLOCATION/", "/" + name + "%3bx/", "/" + name + "%E3%80%80/",
	} {
		if strings.HasSuffix(p, "/") || strings.HasSuffix(p, "%2f") {
			p += "spelling"
		}
		out = append(out, p)
	}
	return out
}

// pathSpellings asks for every spelling of t.AuthPath (Spellings) without
// a password over HTTP/1.1, HTTP/2 and HTTP/3, each once, and tallies the
// answers by protocol and status. None may reach the upstream (the table's
// requests upstream): the edge asks for the password (401), redirects to
// the prefix (301), or refuses the path (400).
func pathSpellings(ctx context.Context, t Target, _ Params, out *Outcome) error {
	if t.AuthPath == "" {
		return fmt.Errorf("testattack: the target has no path behind basic auth")
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	h2 := &http.Transport{TLSClientConfig: t.tlsConfig("h2"), Protocols: new(http.Protocols)}
	h2.Protocols.SetHTTP2(true)
	defer h2.CloseIdleConnections()
	rts := map[string]http.RoundTripper{"h2": h2}
	if t.HTTP3 != "" {
		h3 := &http3.Transport{TLSClientConfig: t.tlsConfig("h3")}
		defer h3.Close()
		rts["h3"] = h3
	}
	var before int64
	if t.Upstream != nil {
		before = t.Upstream.Stats().Requests
	}
	spellings := Spellings(t.AuthPath)
	for _, p := range spellings {
		out.Answers.Add("h1 "+t.rawGet(ctx, p), 1)
		for _, proto := range []string{"h2", "h3"} {
			if rt := rts[proto]; rt != nil {
				out.Answers.Add(proto+" "+t.get(ctx, rt, proto, p), 1)
			}
		}
	}
	out.Held = len(spellings)
	out.Note("%d spellings of %s, each over %d protocols, without a password", len(spellings), t.AuthPath, len(rts)+1)
	if t.Upstream != nil {
		out.Note("%d reached the upstream", t.Upstream.Stats().Requests-before)
	}
	return nil
}

// rawGet sends GET target over HTTP/1.1 as written and returns the status
// (or what went wrong).
func (t Target) rawGet(ctx context.Context, target string) string {
	c, err := t.dialTLS(ctx, nil, "http/1.1")
	if err != nil {
		return errKind(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, "GET "+target+" HTTP/1.1\r\nHost: "+t.Host+"\r\nUser-Agent: Go-http-client/1.1\r\nConnection: close\r\n\r\n"); err != nil {
		return errKind(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return errKind(err)
	}
	res.Body.Close()
	return strconv.Itoa(res.StatusCode)
}

// get sends GET target with rt, its path as written, and returns the
// status (or what went wrong).
func (t Target) get(ctx context.Context, rt http.RoundTripper, proto, target string) string {
	host := t.HTTPS
	if proto == "h3" {
		host = t.HTTP3
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+"/", nil)
	if err != nil {
		return errKind(err)
	}
	path, query, _ := strings.Cut(target, "?")
	if strings.HasPrefix(path, "//") {
		req.URL.Path = path // an Opaque "//x" would be sent as an absolute URL
	} else {
		req.URL.Opaque = path
	}
	req.URL.RawQuery = query
	req.Host = t.Host
	req.Header.Set("User-Agent", "Go-http-client/1.1")
	res, err := rt.RoundTrip(req)
	if err != nil {
		return errKind(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return strconv.Itoa(res.StatusCode)
}
