// Command go-api-check reads, as a Go client (client-go v0.37.1) does, the objects draflow writes and
// checks each one the way upstream's Go code sees it:
//
//   - strict decoding into the k8s.io/api types (sigs.k8s.io/json: unknown fields, duplicate fields and
//     wrong types are errors), the decoding a Go controller or kubectl --validate=strict applies;
//
//   - upstream's API validation (k8s.io/kubernetes/pkg/apis/.../validation at v1.37.1) on the internal type
//     after conversion with the API server's own scheme: the object's create validation and its status
//     validated as if it were written onto an empty status.
//
//     go-api-check --namespace NS [--namespace NS2] [--lease-namespace kube-node-lease] [--node NODE]
//     [--name-prefix P] [--feature-gates A=true,B=true] [--kinds ResourceClaim,Pod,...]
//
// --name-prefix limits the cluster-scoped kinds and Leases to the objects whose name starts with P (a
// shared API server holds other tests' objects, some deliberately invalid).
//
// Prints one JSON report on stdout: {"checked": {kind: count}, "unserved": [kind], "problems": [{kind,
// namespace, name, problem}]}; exit status 0 when it could read everything (problems or not), 1 otherwise.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

type list []string

var namePrefix string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

type problem struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Problem   string `json:"problem"`
}

type report struct {
	Checked  map[string]int `json:"checked"`
	Unserved []string       `json:"unserved"`
	Problems []problem      `json:"problems"`
}

func main() {
	var namespaces, leaseNamespaces, nodes list
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig")
	gates := flag.String("feature-gates", "", "the API server's feature gates (A=true,B=false), for validation")
	kinds := flag.String("kinds", strings.Join(allKinds(), ","), "kinds to check")
	flag.Var(&namespaces, "namespace", "namespace of the namespaced objects (repeatable)")
	flag.Var(&leaseNamespaces, "lease-namespace", "namespace of Leases to check (repeatable)")
	flag.Var(&nodes, "node", "only the ResourceSlices of this node (repeatable; default: every slice)")
	flag.StringVar(&namePrefix, "name-prefix", "", "only cluster-scoped objects and Leases named with this prefix")
	flag.Parse()
	if err := run(*kubeconfig, *gates, strings.Split(*kinds, ","), namespaces, leaseNamespaces, nodes); err != nil {
		fmt.Fprintln(os.Stderr, "go-api-check:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, gates string, kinds, namespaces, leaseNamespaces, nodes []string) error {
	if gates != "" {
		m := map[string]bool{}
		for _, kv := range strings.Split(gates, ",") {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v == "true"
		}
		if err := feature.DefaultMutableFeatureGate.SetFromMap(m); err != nil {
			return fmt.Errorf("feature gates: %w", err)
		}
	}
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	config.AcceptContentTypes = "application/json"
	config.ContentType = "application/json"
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	r := report{Checked: map[string]int{}, Unserved: []string{}, Problems: []problem{}}
	ctx := context.Background()
	for _, kind := range kinds {
		c, ok := checkers[kind]
		if !ok {
			return fmt.Errorf("unknown kind %q (known: %s)", kind, strings.Join(allKinds(), ","))
		}
		for _, path := range c.paths(namespaces, leaseNamespaces, nodes) {
			if err := readList(ctx, client.CoreV1().RESTClient(), path, kind, c, &r); err != nil {
				if apierrors.IsNotFound(err) {
					r.Unserved = append(r.Unserved, kind)
					break
				}
				return fmt.Errorf("%s: %w", path, err)
			}
		}
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// readList GETs one list as raw JSON and checks every item on its own.
func readList(ctx context.Context, client rest.Interface, path, kind string, c checker, r *report) error {
	path, query, _ := strings.Cut(path, "?")
	req := client.Get().AbsPath(path)
	values, err := url.ParseQuery(query)
	if err != nil {
		return err
	}
	for k, vs := range values {
		for _, v := range vs {
			req = req.Param(k, v)
		}
	}
	raw, err := req.DoRaw(ctx)
	if err != nil {
		return err
	}
	var doc struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("not a list: %w", err)
	}
	for _, item := range doc.Items {
		ns, name, problems := c.check(item)
		if c.byPrefix && !strings.HasPrefix(name, namePrefix) {
			continue
		}
		r.Checked[kind]++
		for _, p := range problems {
			r.Problems = append(r.Problems, problem{Kind: kind, Namespace: ns, Name: name, Problem: p})
		}
	}
	return nil
}

func allKinds() []string {
	out := make([]string, 0, len(checkers))
	for k := range checkers {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
