// Command pause is the process of a pod sandbox: it holds the pod's namespaces until the
// kubelet stops the sandbox (SIGTERM or SIGINT, exit 0). As PID 1 of a shared PID
// namespace it reaps orphans, which would otherwise stay zombies.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		// One SIGCHLD may stand for several exits: reap all that are ready.
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
