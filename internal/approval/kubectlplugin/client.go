package kubectlplugin

import (
	"context"
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

// apiClient is what the plugins ask of the API server: WaitingPods and
// SchedulingProfiles through a REST client of their group, pods and the
// caller's identity through client-go's typed clients. A full clientset or
// a controller-runtime client would link far more than a command that
// patches one field needs.
type apiClient struct {
	crd     rest.Interface
	params  runtime.ParameterCodec
	pods    corev1client.PodsGetter
	reviews authenticationv1client.SelfSubjectReviewsGetter
}

func newAPIClient(cfg *rest.Config) (*apiClient, error) {
	scheme := runtime.NewScheme()
	utilruntime.Must(schedulingv1alpha1.AddToScheme(scheme))
	crdConfig := rest.CopyConfig(cfg)
	crdConfig.GroupVersion = &schedulingv1alpha1.GroupVersion
	crdConfig.APIPath = "/apis"
	crdConfig.ContentType = runtime.ContentTypeJSON
	crdConfig.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if crdConfig.UserAgent == "" {
		crdConfig.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	crd, err := rest.RESTClientFor(crdConfig)
	if err != nil {
		return nil, err
	}
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	auth, err := authenticationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &apiClient{crd: crd, params: runtime.NewParameterCodec(scheme), pods: core, reviews: auth}, nil
}

// dryRun is the API's dryRun option for server, whether to send without
// persisting.
func dryRun(server bool) []string {
	if server {
		return []string{metav1.DryRunAll}
	}
	return nil
}

func (c *apiClient) whoAmI(ctx context.Context) (string, error) {
	review, err := c.reviews.SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return review.Status.UserInfo.Username, nil
}

func (c *apiClient) getPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return c.pods.Pods(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (c *apiClient) listPods(ctx context.Context, namespace string) (*corev1.PodList, error) {
	return c.pods.Pods(namespace).List(ctx, metav1.ListOptions{})
}

// podGroupExists reports whether the PodGroup of api named name exists in
// namespace. An API the server does not serve has none: NotFound, as for a
// missing object.
func (c *apiClient) podGroupExists(ctx context.Context, api podGroupAPI, namespace, name string) (bool, error) {
	err := c.crd.Get().AbsPath("/apis", api.groupVersion(), "namespaces", namespace, "podgroups", name).Do(ctx).Error()
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, err
}

func (c *apiClient) listProfiles(ctx context.Context) (*schedulingv1alpha1.SchedulingProfileList, error) {
	list := &schedulingv1alpha1.SchedulingProfileList{}
	return list, c.crd.Get().Resource("schedulingprofiles").Do(ctx).Into(list)
}

func (c *apiClient) getWaitingPod(ctx context.Context, namespace, name string) (*schedulingv1alpha1.WaitingPod, error) {
	wp := &schedulingv1alpha1.WaitingPod{}
	return wp, c.crd.Get().Namespace(namespace).Resource("waitingpods").Name(name).Do(ctx).Into(wp)
}

func (c *apiClient) listWaitingPods(ctx context.Context, namespace string, sel labels.Selector) (*schedulingv1alpha1.WaitingPodList, error) {
	list := &schedulingv1alpha1.WaitingPodList{}
	return list, c.crd.Get().Namespace(namespace).Resource("waitingpods").
		VersionedParams(&metav1.ListOptions{LabelSelector: sel.String()}, c.params).Do(ctx).Into(list)
}

func (c *apiClient) createWaitingPod(ctx context.Context, wp *schedulingv1alpha1.WaitingPod, serverDryRun bool) error {
	return c.crd.Post().Namespace(wp.Namespace).Resource("waitingpods").
		VersionedParams(&metav1.CreateOptions{DryRun: dryRun(serverDryRun)}, c.params).Body(wp).Do(ctx).Into(wp)
}

// patchWaitingPod writes what changed from orig to wp as a merge patch that
// carries orig's resourceVersion: a WaitingPod changed since it was read
// makes the patch a conflict instead of being overwritten.
func (c *apiClient) patchWaitingPod(ctx context.Context, orig, wp *schedulingv1alpha1.WaitingPod, serverDryRun bool) error {
	from, err := json.Marshal(orig)
	if err != nil {
		return err
	}
	to, err := json.Marshal(wp)
	if err != nil {
		return err
	}
	patch, err := jsonpatch.CreateMergePatch(from, to)
	if err != nil {
		return fmt.Errorf("making the patch of waitingpod %s/%s: %w", wp.Namespace, wp.Name, err)
	}
	fields := map[string]any{}
	if err := json.Unmarshal(patch, &fields); err != nil {
		return err
	}
	metadata, _ := fields["metadata"].(map[string]any)
	if metadata == nil {
		metadata = map[string]any{}
	}
	metadata["resourceVersion"] = orig.ResourceVersion
	fields["metadata"] = metadata
	if patch, err = json.Marshal(fields); err != nil {
		return err
	}
	return c.crd.Patch(types.MergePatchType).Namespace(wp.Namespace).Resource("waitingpods").Name(wp.Name).
		VersionedParams(&metav1.PatchOptions{DryRun: dryRun(serverDryRun)}, c.params).Body(patch).Do(ctx).Into(wp)
}

// deleteWaitingPod deletes wp if it is still the object with wp's UID.
func (c *apiClient) deleteWaitingPod(ctx context.Context, wp *schedulingv1alpha1.WaitingPod, serverDryRun bool) error {
	uid := wp.UID
	return c.crd.Delete().Namespace(wp.Namespace).Resource("waitingpods").Name(wp.Name).
		Body(&metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, DryRun: dryRun(serverDryRun)}).Do(ctx).Error()
}
