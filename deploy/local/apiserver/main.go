// A kube-apiserver binary built from the published k8s.io/kubernetes module, for the watcher
// tests: deploy/local/apiserver.sh builds, caches and starts it on loopback.
package main

import (
	"os"
	_ "time/tzdata" // zone data inside the binary, so it runs on hosts without it

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the build-info metric
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
