// Command go-alloc-diff runs upstream's structured allocator (k8s.io/dynamic-resource-allocation v0.37.1
// structured.NewAllocator + Allocate) over scenarios read as JSON lines on stdin and writes one JSON line
// per scenario on stdout, flushed after each line, so one process serves a whole test session.
//
// A scenario: {"id", "features": {"AdminAccess": true, ...} (structured.Features field names),
// "node": v1.Node, "slices": [ResourceSlice], "classes": [DeviceClass], "claims": [ResourceClaim to
// allocate, in order], "allocated": [ResourceClaim with status.allocation]}.
//
// An answer: {"id", "outcome": "allocated" | "unsatisfiable" | "failed_on_node" | "error" | "bad_input",
// "results": [AllocationResult] (allocated), "error": text}. "failed_on_node" is an error wrapping
// structured.ErrFailedAllocationOnNode (only this node is unsuitable, e.g. an invalid pool); "error" is
// any other error (broken input: CEL, unknown class...); "bad_input" means the line did not decode.
//
// The allocated state is built from the allocated claims as kube-scheduler's DRA plugin does: results
// with adminAccess do not count; with ConsumableCapacity a result with a shareID is a shared allocation
// (its consumedCapacity summed per device); every other result allocates its device exclusively.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

type scenario struct {
	ID        string                       `json:"id"`
	Features  structured.Features          `json:"features"`
	Node      *v1.Node                     `json:"node"`
	Slices    []*resourceapi.ResourceSlice `json:"slices"`
	Classes   []*resourceapi.DeviceClass   `json:"classes"`
	Claims    []*resourceapi.ResourceClaim `json:"claims"`
	Allocated []*resourceapi.ResourceClaim `json:"allocated"`
	// TimeoutSeconds > 0 bounds Allocate by a context deadline (the scheduler's DRASchedulerFilterTimeout
	// does the same); running out answers "timeout".
	TimeoutSeconds float64 `json:"timeoutSeconds,omitempty"`
}

type answer struct {
	ID      string                         `json:"id"`
	Outcome string                         `json:"outcome"`
	Results []resourceapi.AllocationResult `json:"results,omitempty"`
	Error   string                         `json:"error,omitempty"`
}

// classes is the DeviceClassLister over the scenario's classes (in their order).
type classes []*resourceapi.DeviceClass

func (c classes) List() ([]*resourceapi.DeviceClass, error) { return c, nil }

func (c classes) Get(name string) (*resourceapi.DeviceClass, error) {
	for _, class := range c {
		if class.Name == name {
			return class, nil
		}
	}
	return nil, fmt.Errorf("deviceclass %q not found", name)
}

func main() {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			if encErr := enc.Encode(run(line)); encErr != nil {
				fmt.Fprintln(os.Stderr, "go-alloc-diff:", encErr)
				os.Exit(1)
			}
			if flushErr := out.Flush(); flushErr != nil {
				os.Exit(1)
			}
		}
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "go-alloc-diff:", err)
			os.Exit(1)
		}
	}
}

func run(line []byte) (ans answer) {
	var sc scenario
	if err := json.Unmarshal(line, &sc); err != nil {
		return answer{Outcome: "bad_input", Error: err.Error()}
	}
	ans.ID = sc.ID
	defer func() {
		if r := recover(); r != nil {
			ans = answer{ID: sc.ID, Outcome: "error", Error: fmt.Sprintf("panic: %v", r)}
		}
	}()
	if sc.Node == nil {
		sc.Node = &v1.Node{}
	}
	ctx := context.Background()
	if sc.TimeoutSeconds > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(sc.TimeoutSeconds*float64(time.Second)))
		defer cancel()
	}
	cache := cel.NewCache(10, cel.Features{
		EnableConsumableCapacity: sc.Features.ConsumableCapacity,
		EnableListTypeAttributes: sc.Features.ListTypeAttributes,
	})
	allocator, err := structured.NewAllocator(ctx, sc.Features, allocatedState(sc), classes(sc.Classes), sc.Slices, cache)
	if err != nil {
		return answer{ID: sc.ID, Outcome: "error", Error: err.Error()}
	}
	results, err := allocator.Allocate(ctx, sc.Node, sc.Claims)
	switch {
	case err != nil && ctx.Err() != nil:
		return answer{ID: sc.ID, Outcome: "timeout", Error: err.Error()}
	case errors.Is(err, structured.ErrFailedAllocationOnNode):
		return answer{ID: sc.ID, Outcome: "failed_on_node", Error: err.Error()}
	case err != nil:
		return answer{ID: sc.ID, Outcome: "error", Error: err.Error()}
	case results == nil:
		return answer{ID: sc.ID, Outcome: "unsatisfiable"}
	}
	return answer{ID: sc.ID, Outcome: "allocated", Results: results}
}

func allocatedState(sc scenario) structured.AllocatedState {
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, claim := range sc.Allocated {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, result := range claim.Status.Allocation.Devices.Results {
			if result.AdminAccess != nil && *result.AdminAccess {
				continue
			}
			id := structured.MakeDeviceID(result.Driver, result.Pool, result.Device)
			if sc.Features.ConsumableCapacity && result.ShareID != nil {
				state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, result.ShareID))
				if result.ConsumedCapacity != nil {
					state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, result.ConsumedCapacity))
				}
				continue
			}
			state.AllocatedDevices.Insert(id)
		}
	}
	return state
}
