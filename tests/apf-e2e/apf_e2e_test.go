// Package apfe2e runs Kubernetes' own "API priority and fairness" e2e specs
// (k8s.io/kubernetes/test/e2e/apimachinery, flowcontrol.go) against the server
// that --kubeconfig names: in scripts/apf-e2e.sh, our proxy in front of the
// real kube-apiserver. Only the flag handling and the ginkgo runner are ours;
// the specs come unchanged from the k8s.io/kubernetes module that go.mod pins.
//
// Unlike k8s.io/kubernetes/test/e2e, this suite has no SynchronizedBeforeSuite:
// that one waits for schedulable nodes and system pods, which a lone
// kube-apiserver has none of.
package apfe2e

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"

	// The specs: every apimachinery spec registers, and --ginkgo.focus picks
	// the flow-control ones (scripts/apf-e2e.sh).
	_ "k8s.io/kubernetes/test/e2e/apimachinery"
)

func TestMain(m *testing.M) {
	// The flags k8s.io/kubernetes/test/e2e registers (e2e_test.go).
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	if flag.CommandLine.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unknown additional command line arguments: %s\n", flag.CommandLine.Args())
		os.Exit(1)
	}
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

func TestAPFE2E(t *testing.T) {
	logs.InitLogs()
	defer logs.FlushLogs()
	klog.EnableContextualLogging(true)
	gomega.RegisterFailHandler(framework.Fail)
	suiteConfig, reporterConfig := framework.CreateGinkgoConfig()
	ginkgo.RunSpecs(t, "API priority and fairness e2e through kube-apf-proxy", suiteConfig, reporterConfig)
}
