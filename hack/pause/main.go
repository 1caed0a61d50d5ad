// pause: the sandbox process of draflow's locally built pod sandbox image (hack/images.py builds the image).
// It holds the pod's namespaces open, reaps orphaned children (it is PID 1 of a shared PID namespace) and
// exits 0 on SIGTERM or SIGINT. Written for draflow; no registry image is needed on a node.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			for {
				var status syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}
