// The kubelet's DRA checkpoint code as a command (see main.go). Built by hack/binaries.sh (kubelet-checkpoint).
// k8s.io/kubernetes requires its staging modules at v0.0.0 (replaced by ./staging in its own repo), so each
// is replaced here by its published version, as hack/binaries.sh does for kube-apiserver.
module local.draflow/kubelet-checkpoint

go 1.26.0

replace k8s.io/api => k8s.io/api v0.37.1

replace k8s.io/apiextensions-apiserver => k8s.io/apiextensions-apiserver v0.37.1

replace k8s.io/apimachinery => k8s.io/apimachinery v0.37.1

replace k8s.io/apiserver => k8s.io/apiserver v0.37.1

replace k8s.io/cli-runtime => k8s.io/cli-runtime v0.37.1

replace k8s.io/client-go => k8s.io/client-go v0.37.1

replace k8s.io/cloud-provider => k8s.io/cloud-provider v0.37.1

replace k8s.io/cluster-bootstrap => k8s.io/cluster-bootstrap v0.37.1

replace k8s.io/code-generator => k8s.io/code-generator v0.37.1

replace k8s.io/component-base => k8s.io/component-base v0.37.1

replace k8s.io/component-helpers => k8s.io/component-helpers v0.37.1

replace k8s.io/controller-manager => k8s.io/controller-manager v0.37.1

replace k8s.io/cri-api => k8s.io/cri-api v0.37.1

replace k8s.io/cri-client => k8s.io/cri-client v0.37.1

replace k8s.io/cri-streaming => k8s.io/cri-streaming v0.37.1

replace k8s.io/csi-translation-lib => k8s.io/csi-translation-lib v0.37.1

replace k8s.io/dynamic-resource-allocation => k8s.io/dynamic-resource-allocation v0.37.1

replace k8s.io/endpointslice => k8s.io/endpointslice v0.37.1

replace k8s.io/externaljwt => k8s.io/externaljwt v0.37.1

replace k8s.io/kms => k8s.io/kms v0.37.1

replace k8s.io/kube-aggregator => k8s.io/kube-aggregator v0.37.1

replace k8s.io/kube-controller-manager => k8s.io/kube-controller-manager v0.37.1

replace k8s.io/kube-proxy => k8s.io/kube-proxy v0.37.1

replace k8s.io/kube-scheduler => k8s.io/kube-scheduler v0.37.1

replace k8s.io/kubectl => k8s.io/kubectl v0.37.1

replace k8s.io/kubelet => k8s.io/kubelet v0.37.1

replace k8s.io/metrics => k8s.io/metrics v0.37.1

replace k8s.io/mount-utils => k8s.io/mount-utils v0.37.1

replace k8s.io/pod-security-admission => k8s.io/pod-security-admission v0.37.1

replace k8s.io/sample-apiserver => k8s.io/sample-apiserver v0.37.1

replace k8s.io/streaming => k8s.io/streaming v0.37.1

require k8s.io/kubernetes v1.37.1

require (
	github.com/fsnotify/fsnotify v1.9.0 // indirect
	github.com/fxamacker/cbor/v2 v2.9.1 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.3-0.20250322232337-35a7c28c31ee // indirect
	github.com/x448/float16 v0.8.4 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	golang.org/x/net v0.57.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.40.0 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	k8s.io/api v0.0.0 // indirect
	k8s.io/apimachinery v0.37.1 // indirect
	k8s.io/klog/v2 v2.140.0 // indirect
	k8s.io/kube-openapi v0.0.0-20260721132016-d427ff9ee9ad // indirect
	k8s.io/utils v0.0.0-20260626114624-be93311217bd // indirect
	sigs.k8s.io/json v0.0.0-20250730193827-2d320260d730 // indirect
	sigs.k8s.io/randfill v1.0.0 // indirect
	sigs.k8s.io/structured-merge-diff/v6 v6.4.2 // indirect
)
