package main

import (
	"fmt"
	"net/url"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1alpha3 "k8s.io/api/resource/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/coordination"
	_ "k8s.io/kubernetes/pkg/apis/coordination/install"
	coordinationvalidation "k8s.io/kubernetes/pkg/apis/coordination/validation"
	"k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	_ "k8s.io/kubernetes/pkg/apis/events/install"
	"k8s.io/kubernetes/pkg/apis/resource"
	_ "k8s.io/kubernetes/pkg/apis/resource/install"
	resourcevalidation "k8s.io/kubernetes/pkg/apis/resource/validation"
	"k8s.io/kubernetes/pkg/apis/scheduling"
	_ "k8s.io/kubernetes/pkg/apis/scheduling/install"
	schedulingvalidation "k8s.io/kubernetes/pkg/apis/scheduling/validation"
	sigsjson "sigs.k8s.io/json"
)

// checker reads one kind: where its lists are, and how one item is checked.
type checker struct {
	paths func(namespaces, leaseNamespaces, nodes []string) []string
	check func(raw []byte) (namespace, name string, problems []string)
	// byPrefix: only objects named with --name-prefix are checked
	byPrefix bool
}

func namespaced(prefix, resource string) func(ns, _, _ []string) []string {
	return func(namespaces, _, _ []string) []string {
		var out []string
		for _, ns := range namespaces {
			out = append(out, fmt.Sprintf("%s/namespaces/%s/%s", prefix, ns, resource))
		}
		return out
	}
}

func cluster(path string) func(_, _, _ []string) []string {
	return func(_, _, _ []string) []string { return []string{path} }
}

var checkers = map[string]checker{
	"ResourceClaim": {namespaced("/apis/resource.k8s.io/v1", "resourceclaims"),
		typed(func(v *resourcev1.ResourceClaim, in *resource.ResourceClaim) field.ErrorList {
			before := in.DeepCopy()
			before.Status = resource.ResourceClaimStatus{}
			return append(resourcevalidation.ValidateResourceClaim(in),
				resourcevalidation.ValidateResourceClaimStatusUpdate(in, before)...)
		}), false},
	"Pod": {namespaced("/api/v1", "pods"),
		typed(func(v *corev1.Pod, in *core.Pod) field.ErrorList {
			// the status as the API server creates it (qosClass is set then and immutable)
			before := in.DeepCopy()
			before.Status = core.PodStatus{Phase: core.PodPending, QOSClass: in.Status.QOSClass}
			opts := podutil.GetValidationOptionsFromPodSpecAndMeta(&in.Spec, nil, &in.ObjectMeta, nil)
			return corevalidation.ValidatePodStatusUpdate(in, before, opts)
		}), false},
	"PodGroup": {namespaced("/apis/scheduling.k8s.io/v1beta1", "podgroups"),
		typed(func(v *schedulingv1beta1.PodGroup, in *scheduling.PodGroup) field.ErrorList {
			before := in.DeepCopy()
			before.Status = scheduling.PodGroupStatus{}
			return append(schedulingvalidation.ValidatePodGroup(in),
				schedulingvalidation.ValidatePodGroupStatusUpdate(in, before)...)
		}), false},
	"Event": {namespaced("/apis/events.k8s.io/v1", "events"),
		typed(func(v *eventsv1.Event, in *core.Event) field.ErrorList {
			return corevalidation.ValidateEventCreate(in, eventsv1.SchemeGroupVersion)
		}), false},
	"Lease": {func(_, leaseNamespaces, _ []string) []string {
		return namespaced("/apis/coordination.k8s.io/v1", "leases")(leaseNamespaces, nil, nil)
	}, typed(func(v *coordinationv1.Lease, in *coordination.Lease) field.ErrorList {
		return coordinationvalidation.ValidateLease(in)
	}), true},
	"ResourceSlice": {func(_, _, nodes []string) []string {
		if len(nodes) == 0 {
			return []string{"/apis/resource.k8s.io/v1/resourceslices"}
		}
		var out []string
		for _, node := range nodes {
			out = append(out, "/apis/resource.k8s.io/v1/resourceslices?fieldSelector="+url.QueryEscape("spec.nodeName="+node))
		}
		return out
	}, typed(func(v *resourcev1.ResourceSlice, in *resource.ResourceSlice) field.ErrorList {
		return resourcevalidation.ValidateResourceSlice(in)
	}), false},
	"DeviceTaintRule": {cluster("/apis/resource.k8s.io/v1/devicetaintrules"),
		typed(func(v *resourcev1.DeviceTaintRule, in *resource.DeviceTaintRule) field.ErrorList {
			before := in.DeepCopy()
			before.Status = resource.DeviceTaintRuleStatus{}
			return append(resourcevalidation.ValidateDeviceTaintRule(in),
				resourcevalidation.ValidateDeviceTaintRuleStatusUpdate(in, before)...)
		}), true},
	"ResourcePoolStatusRequest": {cluster("/apis/resource.k8s.io/v1alpha3/resourcepoolstatusrequests"),
		typed(func(v *resourcev1alpha3.ResourcePoolStatusRequest, in *resource.ResourcePoolStatusRequest) field.ErrorList {
			before := in.DeepCopy()
			before.Status = nil
			return append(resourcevalidation.ValidateResourcePoolStatusRequest(in),
				resourcevalidation.ValidateResourcePoolStatusRequestStatusUpdate(in, before)...)
		}), true},
}

// object is what every versioned type has.
type object interface {
	GetNamespace() string
	GetName() string
}

// typed decodes raw strictly into V, converts it to the internal I with the API server's scheme and runs
// validate on it.
func typed[V any, I any, PV interface {
	*V
	object
}, PI interface{ *I }](validate func(v PV, in PI) field.ErrorList) func([]byte) (string, string, []string) {
	return func(raw []byte) (string, string, []string) {
		v := PV(new(V))
		strict, err := sigsjson.UnmarshalStrict(raw, v, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
		if err != nil {
			var meta metav1.PartialObjectMetadata
			_ = sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &meta)
			return meta.Namespace, meta.Name, []string{"decode: " + err.Error()}
		}
		var problems []string
		for _, e := range strict {
			problems = append(problems, "strict decode: "+e.Error())
		}
		in := PI(new(I))
		if err := legacyscheme.Scheme.Convert(v, in, nil); err != nil {
			return v.GetNamespace(), v.GetName(), append(problems, "convert: "+err.Error())
		}
		for _, e := range validate(v, in) {
			problems = append(problems, "validation: "+e.Error())
		}
		return v.GetNamespace(), v.GetName(), problems
	}
}
