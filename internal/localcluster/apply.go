package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// ReadManifests reads the objects of the YAML files at paths, in order. A
// directory stands for its *.yaml files in name order, leaving out
// kustomize's own kustomization.yaml and kustomizeconfig.yaml: enough for
// directories whose kustomization only lists resources.
func ReadManifests(paths ...string) ([]*unstructured.Unstructured, error) {
	var files []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		matches, err := filepath.Glob(filepath.Join(p, "*.yaml"))
		if err != nil {
			return nil, err
		}
		slices.Sort(matches)
		for _, m := range matches {
			if base := filepath.Base(m); !strings.HasPrefix(base, "kustomiz") {
				files = append(files, m)
			}
		}
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			objs = append(objs, &u)
		}
	}
	return objs, nil
}

// Applier applies objects with server-side apply, as `kubectl apply
// --server-side` does.
type Applier struct {
	client       dynamic.Interface
	mapper       meta.ResettableRESTMapper
	fieldManager string
}

// NewApplier returns an applier that owns the fields it sets as fieldManager.
func NewApplier(cfg *rest.Config, fieldManager string) (*Applier, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Applier{
		client:       client,
		mapper:       restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
		fieldManager: fieldManager,
	}, nil
}

// Apply applies objs in order; namespaced objects without a namespace go
// to the default namespace.
func (a *Applier) Apply(ctx context.Context, objs ...*unstructured.Unstructured) error {
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			// A CRD installed a moment ago: discover again.
			a.mapper.Reset()
			mapping, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		var ri dynamic.ResourceInterface = a.client.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = metav1.NamespaceDefault
			}
			ri = a.client.Resource(mapping.Resource).Namespace(ns)
		}
		if _, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: a.fieldManager, Force: true}); err != nil {
			return fmt.Errorf("applying %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
	}
	return nil
}

// ApplyFiles reads the manifests at paths (see ReadManifests) and applies them.
func (a *Applier) ApplyFiles(ctx context.Context, paths ...string) error {
	objs, err := ReadManifests(paths...)
	if err != nil {
		return err
	}
	return a.Apply(ctx, objs...)
}
