// A kube-controller-manager binary built from the published k8s.io/kubernetes module, for the
// tests that need controllers (the Job controller, the ResourceQuota controller) beside the real
// kube-apiserver: deploy/local/apiserver.sh builds, caches and starts it on request.
package main

import (
	"os"
	_ "time/tzdata" // zone data inside the binary (CronJob time zones), for hosts without it

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the build-info metric
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
