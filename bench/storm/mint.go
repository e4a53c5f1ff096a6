package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	utls "github.com/refraction-networking/utls"

	"github.com/maatproxy/maat/challenge"
	"github.com/maatproxy/maat/internal/testattack"
	"github.com/maatproxy/maat/internal/testclient"
	"github.com/maatproxy/maat/policy"
	"github.com/maatproxy/maat/tlsfp"
)

// A returning person holds a pass minted with the edge's secret
// (testattack.MintPass), bound as the edge binds one: to the person's
// /24, to the JA4 of its browser's full handshake (utls's Chrome 133, as
// h2conn speaks it) and its family, under the policy's version. So people
// with a pass hold one whatever challenge.when says: on a calm day an
// edge that challenges only under pressure would never have given them
// one.

// chromeStack returns the JA4 of utls's Chrome 133 full handshake as the
// edge binds a pass to it (tlsfp.Fingerprint.JA4Session), and its family.
func chromeStack(ctx context.Context) (ja4, family string, err error) {
	cert, err := testclient.Certificate()
	if err != nil {
		return "", "", err
	}
	got := make(chan *tlsfp.Fingerprint, 1)
	conf := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"},
		GetConfigForClient: func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
			if fp, err := tlsfp.FromClientHelloInfo(chi, false); err == nil {
				select {
				case got <- fp:
				default:
				}
			}
			return nil, nil
		}}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", conf)
	if err != nil {
		return "", "", err
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_ = c.(*tls.Conn).HandshakeContext(ctx)
			c.Close()
		}
	}()
	raw, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return "", "", err
	}
	c := utls.UClient(raw, &utls.Config{ServerName: "localhost", InsecureSkipVerify: true}, utls.HelloChrome_133)
	_ = c.HandshakeContext(ctx)
	c.Close()
	select {
	case fp := <-got:
		return fp.JA4Session, fp.Client.Family, nil
	case <-time.After(5 * time.Second):
		return "", "", fmt.Errorf("no fingerprint of utls's Chrome 133")
	}
}

// minter returns the function that mints person p's pass for the edge
// whose secret is at secretPath and whose policy is the built-in default
// (policyFile "") or policyFile.
func minter(ctx context.Context, secretPath, policyFile string) (func(p *person) (string, error), error) {
	secret, err := os.ReadFile(secretPath)
	if err != nil {
		return nil, err
	}
	var pol *policy.Policy
	if policyFile == "" {
		pol, err = policy.Default()
	} else {
		pol, err = policy.Load(policyFile, policy.Options{})
	}
	if err != nil {
		return nil, fmt.Errorf("the policy's version: %w", err)
	}
	ja4, family, err := chromeStack(ctx)
	if err != nil {
		return nil, err
	}
	return func(p *person) (string, error) {
		addr, _ := netip.AddrFromSlice(p.from.To4())
		net, _ := addr.Prefix(24)
		v, err := testattack.MintPass(secret, testattack.Pass{Net: net, JA4: ja4, Family: family, Bits: 24,
			Policy: pol.Version(), TTL: 24 * time.Hour}, time.Now())
		if err != nil {
			return "", err
		}
		return challenge.CookieName + "=" + v, nil
	}, nil
}
