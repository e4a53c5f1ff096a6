package clientnet_test

import (
	"fmt"
	"net/netip"

	"github.com/maatproxy/maat/clientnet"
)

func ExamplePrefix() {
	fmt.Println(clientnet.Prefix(netip.MustParseAddr("198.51.100.23")))
	fmt.Println(clientnet.Prefix(netip.MustParseAddr("2001:db8:a:b:c::1")))
	// Output:
	// 198.51.100.0/24
	// 2001:db8:a:b::/64
}
