package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// driver implements kubeletplugin.DRAPlugin. The helper serializes prepare and unprepare calls, so the
// in-memory state needs its mutex only against the health goroutine.
type driver struct {
	c       *config
	journal *journal
	cancel  context.CancelCauseFunc
	cdi     *cdiDir

	mu    sync.Mutex
	inUse map[string]types.UID // device -> claim it is prepared for
}

var _ kubeletplugin.DRAPlugin = (*driver)(nil)

func newDriver(c *config, j *journal, cancel context.CancelCauseFunc) *driver {
	d := &driver{c: c, journal: j, cancel: cancel, cdi: &cdiDir{dir: c.cdiDir, driver: c.driverName},
		inUse: map[string]types.UID{}}
	// Claims prepared by an earlier process of this driver: their CDI spec files are the state.
	for uid, devices := range d.cdi.prepared() {
		for _, dev := range devices {
			d.inUse[dev] = uid
		}
	}
	return d
}

func (d *driver) deviceNames() []string {
	names := make([]string, d.c.devices)
	for i := range names {
		names[i] = fmt.Sprintf("gpu-%d", i)
	}
	return names
}

// resources is the node's one pool (named after the node), its devices in --slices slices.
func (d *driver) resources() resourceslice.DriverResources {
	devices := make([]resourceapi.Device, 0, d.c.devices)
	for i, name := range d.deviceNames() {
		devices = append(devices, resourceapi.Device{
			Name: name,
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"index": {IntValue: ptr.To(int64(i))},
				"model": {StringValue: ptr.To("go-sim")},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: resource.MustParse("16Gi")},
			},
		})
	}
	n := max(d.c.slices, 1)
	slices := make([]resourceslice.Slice, n)
	per := (len(devices) + n - 1) / n
	for i := range slices {
		start, end := min(i*per, len(devices)), min((i+1)*per, len(devices))
		slices[i].Devices = devices[start:end]
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{d.c.nodeName: {Slices: slices}}}
}

// PrepareResourceClaims writes one CDI spec file per claim (named by its UID) with one CDI device per
// allocated device of this driver. Idempotent: preparing a prepared claim rewrites the same file.
func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		result[claim.UID] = d.prepare(ctx, claim)
	}
	return result, nil
}

// FailPrepareAnnotation on a claim makes its prepare fail with the annotation's value as the message (for
// tests of the error path: a per-claim error in the NodePrepareResources response).
const FailPrepareAnnotation = "go-dra.draflow.example/fail-prepare"

func (d *driver) prepare(ctx context.Context, claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	logger := klog.FromContext(ctx).WithValues("claim", klog.KObj(claim), "uid", claim.UID)
	if msg, ok := claim.Annotations[FailPrepareAnnotation]; ok {
		d.journal.write(entry{Op: "prepare-failed", Namespace: claim.Namespace, Name: claim.Name, UID: string(claim.UID), Error: msg})
		return kubeletplugin.PrepareResult{Err: errors.New(msg)}
	}
	if claim.Status.Allocation == nil {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)}
	}
	known := map[string]bool{}
	for _, name := range d.deviceNames() {
		known[name] = true
	}
	var devices []kubeletplugin.Device
	var journaled []entryDevice
	var names []string
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != d.c.driverName {
			continue
		}
		if r.Pool != d.c.nodeName || !known[r.Device] {
			return kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s: device %s/%s is not one of this node's", claim.Namespace, claim.Name, r.Pool, r.Device)}
		}
		if other, ok := d.inUse[r.Device]; ok && other != claim.UID {
			return kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s: device %s is prepared for claim %s", claim.Namespace, claim.Name, r.Device, other)}
		}
		id := d.cdi.deviceID(claim.UID, r.Device)
		devices = append(devices, kubeletplugin.Device{
			Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device, CDIDeviceIDs: []string{id},
		})
		journaled = append(journaled, entryDevice{Request: r.Request, Pool: r.Pool, Device: r.Device, CDIIDs: []string{id}})
		names = append(names, r.Device)
	}
	if err := d.cdi.write(claim, names); err != nil {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s: CDI spec: %w", claim.Namespace, claim.Name, err)}
	}
	for _, name := range names {
		d.inUse[name] = claim.UID
	}
	method, _ := grpc.Method(ctx)
	d.journal.write(entry{Op: "prepare", Method: method, Namespace: claim.Namespace, Name: claim.Name, UID: string(claim.UID), Devices: journaled})
	logger.Info("prepared", "devices", names)
	return kubeletplugin.PrepareResult{Devices: devices}
}

// UnprepareResourceClaims removes the claims' CDI spec files. Unpreparing an unknown claim succeeds.
func (d *driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	result := make(map[types.UID]error, len(claims))
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, claim := range claims {
		err := d.cdi.remove(claim.UID)
		result[claim.UID] = err
		if err != nil {
			continue
		}
		for dev, uid := range d.inUse {
			if uid == claim.UID {
				delete(d.inUse, dev)
			}
		}
		method, _ := grpc.Method(ctx)
		d.journal.write(entry{Op: "unprepare", Method: method, Namespace: claim.Namespace, Name: claim.Name, UID: string(claim.UID)})
		klog.FromContext(ctx).Info("unprepared", "claim", claim.String(), "uid", claim.UID)
	}
	return result, nil
}

// HandleError logs background errors; a fatal one stops the driver (its supervisor restarts it).
func (d *driver) HandleError(ctx context.Context, err error, msg string) {
	runtime.HandleErrorWithContext(ctx, err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.cancel(fmt.Errorf("fatal background error: %w", err))
	}
}

// WatchHealthStatus reports every device Healthy, again every --health-interval (the kubelet treats a
// device as Unknown when its report is older than the timeout).
func (d *driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	tick := time.NewTicker(d.c.healthInterval)
	defer tick.Stop()
	for {
		report := kubeletplugin.DeviceHealthReport{}
		for _, name := range d.deviceNames() {
			report.Devices = append(report.Devices, kubeletplugin.DeviceHealth{
				PoolName: d.c.nodeName, DeviceName: name, Health: kubeletplugin.HealthStatusHealthy,
				LastUpdated: time.Now(), HealthCheckTimeout: 3 * d.c.healthInterval,
			})
		}
		select {
		case <-ctx.Done():
			return nil
		case reports <- report:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
