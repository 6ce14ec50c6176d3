package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sync"

	authv1 "k8s.io/api/authorization/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	netv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// The backend reaches the API through client-go's REST client with a
// scheme of the few API groups it uses, not through client-go's generated
// clientset: the clientset's package initialisers register every API
// group's types (about 10 ms at every start of codeagent, whatever the
// backend) and it adds some 40 MB to the binary.

// codecs are the scheme's serializer and parameter codec.
type codecs struct {
	serializer runtime.NegotiatedSerializer
	params     runtime.ParameterCodec
}

// apiCodecs is built on first use, not in an init, so that a codeagent
// that uses no cluster does not pay for it.
var apiCodecs = sync.OnceValue(func() codecs {
	s := runtime.NewScheme()
	// Each AddToScheme registers its group's types and, with
	// metav1.AddToGroupVersion, the options, watch events and Status
	// (from which the REST client makes *errors.StatusError).
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, coordv1.AddToScheme,
		netv1.AddToScheme, authv1.AddToScheme, nodev1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return codecs{serializer.NewCodecFactory(s).WithoutConversion(), runtime.NewParameterCodec(s)}
})

// client is the backend's access to the API: a REST client per API group
// version, sharing one connection pool and rate limiter as a clientset's do.
type client struct {
	core, coord, net, authz, node *rest.RESTClient
	params                        runtime.ParameterCodec
}

func newClient(rc *rest.Config) (*client, error) {
	cc := apiCodecs()
	cfg := *rc
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return nil, errors.New("burst is required to be greater than 0 when RateLimiter is not set and QPS is set to greater than 0")
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	hc, err := rest.HTTPClientFor(&cfg)
	if err != nil {
		return nil, err
	}
	c := &client{params: cc.params}
	for _, g := range []struct {
		rc **rest.RESTClient
		gv schema.GroupVersion
	}{
		{&c.core, corev1.SchemeGroupVersion},
		{&c.coord, coordv1.SchemeGroupVersion},
		{&c.net, netv1.SchemeGroupVersion},
		{&c.authz, authv1.SchemeGroupVersion},
		{&c.node, nodev1.SchemeGroupVersion},
	} {
		gc := cfg
		gc.GroupVersion = &g.gv
		gc.APIPath = "/apis"
		if g.gv.Group == "" {
			gc.APIPath = "/api"
		}
		gc.NegotiatedSerializer = cc.serializer
		if *g.rc, err = rest.RESTClientForConfigAndClient(&gc, hc); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *client) pods(ns string) typed[*corev1.Pod, *corev1.PodList] {
	return newTyped[corev1.Pod, corev1.PodList](c.core, c.params, "pods", ns)
}

func (c *client) configMaps(ns string) typed[*corev1.ConfigMap, *corev1.ConfigMapList] {
	return newTyped[corev1.ConfigMap, corev1.ConfigMapList](c.core, c.params, "configmaps", ns)
}

func (c *client) nodes() typed[*corev1.Node, *corev1.NodeList] {
	return newTyped[corev1.Node, corev1.NodeList](c.core, c.params, "nodes", "")
}

func (c *client) leases(ns string) typed[*coordv1.Lease, *coordv1.LeaseList] {
	return newTyped[coordv1.Lease, coordv1.LeaseList](c.coord, c.params, "leases", ns)
}

func (c *client) networkPolicies(ns string) typed[*netv1.NetworkPolicy, *netv1.NetworkPolicyList] {
	return newTyped[netv1.NetworkPolicy, netv1.NetworkPolicyList](c.net, c.params, "networkpolicies", ns)
}

func (c *client) runtimeClasses() typed[*nodev1.RuntimeClass, *nodev1.RuntimeClassList] {
	return newTyped[nodev1.RuntimeClass, nodev1.RuntimeClassList](c.node, c.params, "runtimeclasses", "")
}

// accessReview asks whether the current user may do what rev says.
func (c *client) accessReview(ctx context.Context, rev *authv1.SelfSubjectAccessReview) (*authv1.SelfSubjectAccessReview, error) {
	got := &authv1.SelfSubjectAccessReview{}
	err := c.authz.Post().Resource("selfsubjectaccessreviews").
		VersionedParams(&metav1.CreateOptions{}, c.params).Body(rev).Do(ctx).Into(got)
	return got, err
}

// serverVersion is the API server's GET /version.
func (c *client) serverVersion(ctx context.Context) (*version.Info, error) {
	body, err := c.core.Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var info version.Info
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, fmt.Errorf("unable to parse the server version: %v", err)
	}
	return &info, nil
}

// resourcesFor lists the resources the server has in groupVersion, an API
// group's "group/version".
func (c *client) resourcesFor(ctx context.Context, groupVersion string) (*metav1.APIResourceList, error) {
	l := &metav1.APIResourceList{GroupVersion: groupVersion}
	if err := c.core.Get().AbsPath("/apis", groupVersion).Do(ctx).Into(l); err != nil {
		return nil, err
	}
	return l, nil
}

// execURL is the exec subresource of pod in ns for opts.
func (c *client) execURL(ns, pod string, opts *corev1.PodExecOptions) *url.URL {
	return c.core.Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(opts, c.params).URL()
}

// object is a pointer to the API type T.
type object[T any] interface {
	*T
	runtime.Object
}

// typed is a resource of one API group version in a namespace ("" for
// a cluster-scoped one), T its objects and L their lists: the part of
// client-go's typed clients the backend uses, with the same requests.
type typed[T, L runtime.Object] struct {
	rc      *rest.RESTClient
	params  runtime.ParameterCodec
	name    string
	ns      string
	newObj  func() T
	newList func() L
}

func newTyped[T, L any, PT object[T], PL object[L]](rc *rest.RESTClient, params runtime.ParameterCodec, name, ns string) typed[PT, PL] {
	return typed[PT, PL]{rc: rc, params: params, name: name, ns: ns,
		newObj: func() PT { return PT(new(T)) }, newList: func() PL { return PL(new(L)) }}
}

func (r typed[T, L]) req(verb string) *rest.Request {
	return r.rc.Verb(verb).NamespaceIfScoped(r.ns, r.ns != "").Resource(r.name)
}

func (r typed[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	got := r.newObj()
	err := r.req("GET").Name(name).VersionedParams(&opts, r.params).Do(ctx).Into(got)
	return got, err
}

func (r typed[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	got := r.newList()
	err := r.req("GET").VersionedParams(&opts, r.params).Do(ctx).Into(got)
	return got, err
}

func (r typed[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.req("GET").VersionedParams(&opts, r.params).Watch(ctx)
}

func (r typed[T, L]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	got := r.newObj()
	err := r.req("POST").VersionedParams(&opts, r.params).Body(obj).Do(ctx).Into(got)
	return got, err
}

func (r typed[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (T, error) {
	got := r.newObj()
	err := r.rc.Patch(pt).NamespaceIfScoped(r.ns, r.ns != "").Resource(r.name).Name(name).
		VersionedParams(&opts, r.params).Body(data).Do(ctx).Into(got)
	return got, err
}

func (r typed[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.req("DELETE").Name(name).Body(&opts).Do(ctx).Error()
}
