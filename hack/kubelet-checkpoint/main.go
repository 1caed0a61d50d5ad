// Command kubelet-checkpoint reads and writes a kubelet DRA manager checkpoint (dra_manager_state) with the
// kubelet's own code: k8s.io/kubernetes/pkg/kubelet/cm/dra/state at the version pinned in go.mod. draflow's
// tests use it to prove that kubelet-dra-shim's checkpoint file and the kubelet's are the same format.
//
//	kubelet-checkpoint read FILE    print the claims of FILE (a JSON ClaimInfoStateList) on stdout
//	kubelet-checkpoint write FILE   store the claims read from stdin (a JSON ClaimInfoStateList) in FILE
//
// Both go through state.NewCheckpointer (the kubelet's checkpoint manager: checksum verified on read,
// file created when missing, written the way the kubelet writes it). Errors go to stderr, exit status 1.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/kubernetes/pkg/kubelet/cm/dra/state"
)

func main() {
	if len(os.Args) != 3 || (os.Args[1] != "read" && os.Args[1] != "write") {
		fmt.Fprintln(os.Stderr, "usage: kubelet-checkpoint read|write FILE")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "kubelet-checkpoint:", err)
		os.Exit(1)
	}
}

func run(cmd, file string) error {
	cp, err := state.NewCheckpointer(filepath.Dir(file), filepath.Base(file))
	if err != nil {
		return err
	}
	switch cmd {
	case "read":
		checkpoint, err := cp.GetOrCreate()
		if err != nil {
			return err
		}
		claims, err := checkpoint.GetClaimInfoStateList()
		if err != nil {
			return err
		}
		out, err := json.Marshal(claims)
		if err != nil {
			return err
		}
		_, err = fmt.Println(string(out))
		return err
	default:
		in, err := io.ReadAll(os.Stdin)
		if err != nil {
			return err
		}
		var claims state.ClaimInfoStateList
		if err := json.Unmarshal(in, &claims); err != nil {
			return fmt.Errorf("claims on stdin: %w", err)
		}
		checkpoint, err := state.NewCheckpoint(claims)
		if err != nil {
			return err
		}
		return cp.Store(checkpoint)
	}
}
