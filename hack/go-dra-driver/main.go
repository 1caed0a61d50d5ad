// go-dra-driver: a small third-party DRA driver, written the way an outside vendor writes one, on upstream's
// k8s.io/dynamic-resource-allocation/kubeletplugin helper (v0.37.1). draflow's tests run it against
// kubelet-dra-shim and the allocator to check that draflow's node side speaks to real upstream drivers.
//
// It registers through the kubelet plugin registration socket, serves DRA v1 (and the helper's v1beta1
// wrapper) NodePrepareResources / NodeUnprepareResources by writing and removing CDI spec files named by
// claim UID, publishes its devices as ResourceSlices with the helper's PublishResources (upstream's
// resourceslice controller, no draflow publisher), and reports device health on the helper's health
// service. Every flag has an environment twin (GO_DRA_<FLAG>, upper case, '-' as '_').
//
// What the driver saw is appended to --journal as JSON lines (prepare, unprepare, registration status),
// so a test can check what reached the driver without reading its logs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

type config struct {
	driverName     string
	nodeName       string
	kubeconfig     string
	registryDir    string
	pluginDir      string
	cdiDir         string
	journal        string
	devices        int
	slices         int
	healthInterval time.Duration
	rollingUID     string
	nodeV1         bool
	nodeV1beta1    bool
	health         bool
	healthV1       bool
	healthV1alpha1 bool
}

func flags() *config {
	c := &config{}
	fs := flag.CommandLine
	fs.StringVar(&c.driverName, "driver-name", "gpu.go.draflow.example", "DRA driver name")
	fs.StringVar(&c.nodeName, "node-name", "", "node this driver serves (required)")
	fs.StringVar(&c.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig (empty: in-cluster)")
	fs.StringVar(&c.registryDir, "registry-dir", kubeletplugin.KubeletRegistryDir, "kubelet plugin registration directory")
	fs.StringVar(&c.pluginDir, "plugin-dir", "", "directory of the DRA socket (default: <kubelet plugins dir>/<driver name>)")
	fs.StringVar(&c.cdiDir, "cdi-dir", "/var/run/cdi", "where CDI spec files are written")
	fs.StringVar(&c.journal, "journal", "", "append what the driver saw as JSON lines to this file (empty: none)")
	fs.IntVar(&c.devices, "devices", 4, "number of devices (gpu-0 ... gpu-N-1) in the node's pool")
	fs.IntVar(&c.slices, "slices", 1, "ResourceSlices the pool is published in (devices dealt out in order)")
	fs.DurationVar(&c.healthInterval, "health-interval", 10*time.Second, "how often device health is re-sent")
	fs.StringVar(&c.rollingUID, "rolling-update-uid", "", "this instance's pod UID: enables the helper's rolling updates (sockets named by it)")
	fs.BoolVar(&c.nodeV1, "node-v1", true, "serve and announce DRA gRPC v1")
	fs.BoolVar(&c.nodeV1beta1, "node-v1beta1", true, "serve and announce DRA gRPC v1beta1")
	fs.BoolVar(&c.health, "health", true, "serve and announce the DRAResourceHealth service")
	fs.BoolVar(&c.healthV1, "health-v1", true, "DRAResourceHealth v1")
	fs.BoolVar(&c.healthV1alpha1, "health-v1alpha1", true, "DRAResourceHealth v1alpha1")
	klog.InitFlags(fs)
	// Environment twins first, so that flags given on the command line win.
	fs.VisitAll(func(f *flag.Flag) {
		env := "GO_DRA_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			_ = f.Value.Set(v)
		}
	})
	flag.Parse()
	if c.pluginDir == "" {
		c.pluginDir = filepath.Join(kubeletplugin.KubeletPluginsDir, c.driverName)
	}
	return c
}

func main() {
	c := flags()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "go-dra-driver:", err)
		os.Exit(1)
	}
}

func run(c *config) error {
	if c.nodeName == "" {
		return fmt.Errorf("--node-name is required")
	}
	restConfig, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %q: %w", c.kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	for _, dir := range []string{c.pluginDir, c.cdiDir, c.registryDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
	}
	journal, err := openJournal(c.journal)
	if err != nil {
		return err
	}
	defer journal.close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	logger := klog.FromContext(ctx)

	d := newDriver(c, journal, cancel)
	opts := []kubeletplugin.Option{
		kubeletplugin.KubeClient(client),
		kubeletplugin.DriverName(c.driverName),
		kubeletplugin.NodeName(c.nodeName),
		kubeletplugin.RegistrarDirectoryPath(c.registryDir),
		kubeletplugin.PluginDataDirectoryPath(c.pluginDir),
		kubeletplugin.NodeV1(c.nodeV1),
		kubeletplugin.NodeV1beta1(c.nodeV1beta1),
		kubeletplugin.HealthService(c.health),
		kubeletplugin.HealthV1(c.healthV1),
		kubeletplugin.HealthV1alpha1(c.healthV1alpha1),
	}
	if c.rollingUID != "" {
		opts = append(opts, kubeletplugin.RollingUpdate(types.UID(c.rollingUID)))
	}
	helper, err := kubeletplugin.Start(ctx, d, opts...)
	if err != nil {
		return fmt.Errorf("start kubelet plugin: %w", err)
	}
	defer helper.Stop()
	if err := helper.PublishResources(ctx, d.resources()); err != nil {
		return fmt.Errorf("publish resources: %w", err)
	}
	logger.Info("driver started", "driver", c.driverName, "node", c.nodeName, "devices", c.devices)
	go watchRegistration(ctx, helper, journal)
	<-ctx.Done()
	logger.Info("driver stopping", "cause", context.Cause(ctx))
	return nil
}

// watchRegistration journals every change of the status the kubelet reported with NotifyRegistrationStatus.
func watchRegistration(ctx context.Context, helper *kubeletplugin.Helper, journal *journal) {
	var last string
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if status := helper.RegistrationStatus(); status != nil {
			now := fmt.Sprintf("%v/%s", status.PluginRegistered, status.Error)
			if now != last {
				last = now
				journal.write(entry{Op: "registration", Registered: status.PluginRegistered, Error: status.Error})
				klog.FromContext(ctx).Info("registration status", "registered", status.PluginRegistered, "error", status.Error)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
