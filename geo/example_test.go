package geo_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/maatproxy/maat/geo"
	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "geo-example")
	if err != nil {
		return
	}
	defer os.RemoveAll(dir)
	// An IPinfo Lite file: ASN and country in one database.
	path := filepath.Join(dir, "ipinfo_lite.mmdb")
	if err := writeExampleDB(path); err != nil {
		fmt.Println(err)
		return
	}

	db, err := geo.Open(geo.Config{
		ASNDB:     path,
		CountryDB: path, // read once
		OnReload:  func(path string, err error) { /* log it */ },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Reload files that an updater replaced, until the server stops.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go db.Run(ctx)

	for _, d := range db.Describe() {
		fmt.Println(d.Role, d.Type, d.Built.Format(time.DateOnly))
	}
	fmt.Printf("%+v\n", db.Lookup(netip.MustParseAddr("203.0.113.7")))
	fmt.Printf("%+v\n", db.Lookup(netip.MustParseAddr("192.0.2.1")))
	// Output:
	// ASN and country ipinfo lite.mmdb 2026-01-01
	// {ASN:64500 ASOrg:Example Transit GmbH Country:DE}
	// {ASN:0 ASOrg: Country:}
}

func writeExampleDB(path string) error {
	w, err := mmdbwriter.New(mmdbwriter.Options{
		DatabaseType: "ipinfo lite.mmdb", BuildEpoch: 1767225600, IncludeReservedNetworks: true,
	})
	if err != nil {
		return err
	}
	_, n, _ := net.ParseCIDR("203.0.113.0/24")
	if err := w.Insert(n, mmdbtype.Map{
		"asn": mmdbtype.String("AS64500"), "as_name": mmdbtype.String("Example Transit GmbH"),
		"country": mmdbtype.String("Germany"), "country_code": mmdbtype.String("DE"),
	}); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := w.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
