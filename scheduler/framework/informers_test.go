package framework

import (
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// TestAddIndexConcurrently: callers adding the same index to one informer
// at once all find it there (run with -race: none reads the informer's
// indexers unlocked).
func TestAddIndexConcurrently(t *testing.T) {
	informer := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Core().V1().Pods().Informer()
	byNode := func(obj any) ([]string, error) { return []string{obj.(*v1.Pod).Spec.NodeName}, nil }
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			indexed, err := AddIndex(informer, "node", byNode)
			if !indexed {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("AddIndex: not indexed: %v", err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{NodeName: "n"}}
	if err := informer.GetIndexer().Add(pod); err != nil {
		t.Fatal(err)
	}
	if got, err := informer.GetIndexer().ByIndex("node", "n"); err != nil || len(got) != 1 {
		t.Errorf("ByIndex(node, n) = %v, %v; want the pod", got, err)
	}
}
