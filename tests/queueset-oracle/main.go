//go:build queueset_oracle

// The queue-set oracle: runs k8s.io/apiserver's fairqueuing/queueset on a scenario file and prints
// what it did with each request. The driver itself lives in the queueset package (overlay/,
// added to the package at build time with -overlay): it needs the package's internal hooks.
// Build and run it through scripts/queueset-differential.sh.
package main

import (
	"os"

	"k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing/queueset"
	// The driver (in the queueset package) runs on the package's fake event clock.
	_ "k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing/testing/eventclock"
)

func main() {
	os.Exit(queueset.OracleMain(os.Args[1:], os.Stdout, os.Stderr))
}
