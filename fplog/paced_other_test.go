//go:build !unix

package fplog

import "testing"

func benchPaced(b *testing.B, write func()) { b.Skip("no process CPU time here") }
