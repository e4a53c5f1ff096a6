package testattack_test

import (
	"fmt"

	"github.com/maatproxy/maat/internal/testattack"
)

// An attack tallies what its clients were answered.
func ExampleTally() {
	var answers testattack.Tally
	answers.Add("408", 20)
	answers.Add("reset REFUSED_STREAM", 122)
	answers.Add("held", 1)
	fmt.Println(answers.String())
	// Output: reset REFUSED_STREAM ×122, 408 ×20, held ×1
}

// Each scenario has a short name for selection and a title for a table.
func ExampleScenarios() {
	for _, sc := range testattack.Scenarios() {
		fmt.Println(sc.Name)
	}
	// Output:
	// rapid-reset
	// held-headers
	// trickle
	// slow-read
	// idle
	// idle-h1
	// auth-flood
	// quic-initials
	// big-headers
	// path-spellings
}

// Each gate case has a name for selection (-run gate/paths) and a title.
func ExampleGateCases() {
	for _, gc := range testattack.GateCases() {
		fmt.Println(gc.Name)
	}
	// Output:
	// gate/paths
	// gate/wait
	// gate/transport
	// gate/parrot
	// gate/forwarded
	// gate/location
	// gate/divert
	// gate/trace
	// gate/resume
}
