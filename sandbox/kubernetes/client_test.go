package kubernetes

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestClientErrors checks that the API's failures, a Status as the API
// server sends it, come back as the errors the backend tells apart
// (ensureShared, deletePod, sweep) with the server's message.
func TestClientErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == "GET" && r.URL.Path == "/api/v1/namespaces/ns/configmaps/gone":
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \"gone\" not found","reason":"NotFound","details":{"name":"gone","kind":"configmaps"},"code":404}`))
		case r.Method == "POST" && r.URL.Path == "/apis/coordination.k8s.io/v1/namespaces/ns/leases":
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"leases.coordination.k8s.io \"l\" already exists","reason":"AlreadyExists","details":{"name":"l","group":"coordination.k8s.io","kind":"leases"},"code":409}`))
		case r.Method == "DELETE" && r.URL.Path == "/api/v1/namespaces/ns/pods/p":
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"p\" is forbidden: User \"u\" cannot delete resource \"pods\" in API group \"\" in the namespace \"ns\"","reason":"Forbidden","details":{"name":"p","kind":"pods"},"code":403}`))
		case r.Method == "GET" && r.URL.Path == "/version":
			_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
			w.WriteHeader(http.StatusTeapot)
		}
	}))
	defer srv.Close()
	c, err := newClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if v, err := c.serverVersion(ctx); err != nil || v.GitVersion != "v1.37.2" {
		t.Errorf("serverVersion: %v %v", v, err)
	}
	_, err = c.configMaps("ns").Get(ctx, "gone", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `configmaps "gone" not found`) {
		t.Errorf("404: %v, want NotFound", err)
	}
	_, err = c.leases("ns").Create(ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("409: %v, want AlreadyExists", err)
	}
	err = c.pods("ns").Delete(ctx, "p", metav1.DeleteOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `cannot delete resource "pods"`) {
		t.Errorf("403: %v, want Forbidden", err)
	}
}
