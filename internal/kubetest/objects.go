package kubetest

// Applying manifests: the objects of YAML documents created, or applied
// server-side, through the stack's API server.

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/restmapper"
)

// Apply creates every object of a multi-document YAML (kueue.x-k8s.io
// objects at v1beta2, core objects at v1), in order.
func (s *Stack) Apply(ctx context.Context, doc string) error {
	objs, err := decodeObjects(strings.NewReader(doc))
	if err != nil {
		return err
	}
	for _, u := range objs {
		if err := s.create(ctx, u); err != nil {
			return err
		}
	}
	return nil
}

// create creates one object, at the resource its kind guesses.
func (s *Stack) create(ctx context.Context, u *unstructured.Unstructured) error {
	gvr, _ := meta.UnsafeGuessKindToResource(u.GroupVersionKind())
	var err error
	if ns := u.GetNamespace(); ns != "" {
		_, err = s.Dynamic.Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
	} else {
		_, err = s.Dynamic.Resource(gvr).Create(ctx, u, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("create %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// ServerSideApply applies every object of doc as kubectl apply
// --server-side does (field manager "kubetest", conflicts forced), putting
// namespaced objects without a namespace in namespace; the resource and its
// scope come from the API server's discovery.
func (s *Stack) ServerSideApply(ctx context.Context, doc, namespace string) error {
	objs, err := decodeObjects(strings.NewReader(doc))
	if err != nil {
		return err
	}
	groups, err := restmapper.GetAPIGroupResources(s.Client.Discovery())
	if err != nil {
		return err
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		r := s.Dynamic.Resource(m.Resource)
		opts := metav1.ApplyOptions{FieldManager: "kubetest", Force: true}
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			if u.GetNamespace() == "" {
				u.SetNamespace(namespace)
			}
			_, err = r.Namespace(u.GetNamespace()).Apply(ctx, u.GetName(), u, opts)
		} else {
			_, err = r.Apply(ctx, u.GetName(), u, opts)
		}
		if err != nil {
			return fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}
