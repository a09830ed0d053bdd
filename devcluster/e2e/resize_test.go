// Package e2e is Kubernetes' e2e.test cut down to the in-place pod resize specs: the flags,
// TestMain and RunE2ETests of k8s.io/kubernetes/test/e2e (e2e_test.go, e2e.go) with only
// the two suites that hold them linked in, and without the cloud providers (the runner
// passes --provider=local), and one addition: each spec waits for the pods of the earlier
// specs to go before it starts (earlierPodsGone). Built by scripts/build-e2e-resize.sh into
// .tools/bin/e2e-resize.test; see docs/devcluster.md, "Kubernetes' own resize tests".
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/logs"
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	e2enode "k8s.io/kubernetes/test/e2e/framework/node"

	// define and freeze constants
	_ "k8s.io/kubernetes/test/e2e/feature"

	// test sources: Pod InPlace Resize Container (common/node/pod_resize.go) and the
	// scheduler, quota, limit-range and deferred resize specs (node/pod_resize.go)
	_ "k8s.io/kubernetes/test/e2e/common/node"
	_ "k8s.io/kubernetes/test/e2e/node"

	// reconfigure framework, as upstream's e2e.test does
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/utils/format"

	// Ensure that logging flags are part of the command line.
	_ "k8s.io/component-base/logs/testinit"
)

func handleFlags() {
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
}

func TestMain(m *testing.M) {
	var versionFlag bool
	flag.CommandLine.BoolVar(&versionFlag, "version", false, "Displays version information.")
	handleFlags()
	if versionFlag {
		fmt.Printf("%s\n", version.Get())
		os.Exit(0)
	}
	if flag.CommandLine.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unknown additional command line arguments: %s", flag.CommandLine.Args())
		os.Exit(1)
	}
	// --list-images prints the suite's images and exits here.
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

// Upstream's setupSuite, the part that applies to a cluster without a cloud or system
// pods: every node schedulable before the first spec, the node count, the versions logged.
var _ = ginkgo.SynchronizedBeforeSuite(func(ctx context.Context) []byte {
	c, err := framework.LoadClientset()
	framework.ExpectNoError(err, "Error loading client")
	timeouts := framework.NewTimeoutContext()
	framework.ExpectNoError(e2enode.WaitForAllNodesSchedulable(ctx, c, timeouts.NodeSchedulable))
	if framework.TestContext.CloudConfig.NumNodes == framework.DefaultNumNodes {
		nodes, err := e2enode.GetReadySchedulableNodes(ctx, c)
		framework.ExpectNoError(err)
		framework.TestContext.CloudConfig.NumNodes = len(nodes.Items)
	}
	framework.Logf("e2e test version: %s", version.Get().GitVersion)
	if v, err := c.Discovery().ServerVersion(); err == nil {
		framework.Logf("kube-apiserver version: %s", v.GitVersion)
	}
	return nil
}, func(ctx context.Context, data []byte) {})

// Before each spec, once its namespace exists: no pod of an earlier spec is left. The
// scheduler-focused and deferred-resize specs measure the node's free room from the pods
// on it, and upstream's parallel runner runs them last, long after the others' namespaces
// went; run one after the other here, the namespace controller could still be deleting the
// previous spec's pods, which then free room the spec did not count.
func init() {
	framework.NewFrameworkExtensions = append(framework.NewFrameworkExtensions,
		func(f *framework.Framework) {
			ginkgo.BeforeEach(func(ctx context.Context) {
				if f.ClientSet == nil || f.Namespace == nil {
					return
				}
				framework.ExpectNoError(earlierPodsGone(ctx, f, 3*time.Minute))
			})
		})
}

func earlierPodsGone(ctx context.Context, f *framework.Framework, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := f.ClientSet.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			framework.Logf("listing pods: %v", err)
			return false, nil
		}
		for _, pod := range pods.Items {
			if pod.Namespace != f.Namespace.Name {
				framework.Logf("waiting for pod %s/%s of an earlier spec to go", pod.Namespace, pod.Name)
				return false, nil
			}
		}
		return true, nil
	})
}

func TestE2E(t *testing.T) {
	logs.InitLogs()
	defer logs.FlushLogs()
	klog.EnableContextualLogging(true)
	gomega.RegisterFailHandler(framework.Fail)
	suiteConfig, reporterConfig := framework.CreateGinkgoConfig()
	ginkgo.RunSpecs(t, "Kubernetes e2e suite (in-place pod resize)", suiteConfig, reporterConfig)
}
