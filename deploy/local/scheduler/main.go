// A kube-scheduler binary built from the published k8s.io/kubernetes module, so that gpufrag's
// scheduler extender is tested against the real scheduler: deploy/local/scheduler.sh builds, caches
// and starts it beside deploy/local/apiserver.sh's kube-apiserver.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the build-info metric
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
