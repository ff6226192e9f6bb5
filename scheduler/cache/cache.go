package cache

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

const (
	// DefaultAssumedPodTTL is how long an assumed pod whose binding finished
	// may wait for the bound pod to arrive from the informer before its
	// resources are released. The binding call returning success means the
	// API server stored it, so the watch event normally arrives within
	// milliseconds; the TTL only guards against a binding that was lost.
	DefaultAssumedPodTTL = 15 * time.Minute

	// cleanupPeriod is how often expired assumed pods are looked for.
	cleanupPeriod = time.Second
)

// podState is what the cache knows about one pod.
type podState struct {
	pod *v1.Pod
	// deadline is when an assumed pod expires; nil until its binding finished.
	deadline *time.Time
	// bindingFinished keeps an assumed pod from expiring while its binding runs.
	bindingFinished bool
}

// nodeInfoListItem is a NodeInfo in the cache's generation-ordered list.
type nodeInfoListItem struct {
	info *framework.NodeInfo
	next *nodeInfoListItem
	prev *nodeInfoListItem
}

// Option configures New.
type Option func(*Cache)

// WithAssumedPodTTL sets how long an assumed pod may wait for its bound pod
// after its binding finished; 0 means assumed pods never expire.
func WithAssumedPodTTL(ttl time.Duration) Option {
	return func(c *Cache) { c.ttl = ttl }
}

// WithClock sets the clock used for expiry (tests).
func WithClock(clk clock.WithTicker) Option {
	return func(c *Cache) { c.clock = clk }
}

// WithExpiredPodHandler sets a function called, without the cache's lock
// held, with every assumed pod that expired. The scheduler uses it to put
// the pod back into the queue if it is still unbound.
func WithExpiredPodHandler(fn func(logger klog.Logger, pod *v1.Pod)) Option {
	return func(c *Cache) { c.onExpire = fn }
}

// Cache holds nodes and pods. All methods are safe for concurrent use.
type Cache struct {
	ttl      time.Duration
	clock    clock.WithTicker
	onExpire func(logger klog.Logger, pod *v1.Pod)

	// mu guards every field below. Informer handlers and binding cycles
	// take it for writing; UpdateSnapshot, once per scheduling cycle, takes
	// it for reading, since it only writes the caller's snapshot.
	mu sync.RWMutex
	// assumedPods holds the UIDs of pods assumed but not yet confirmed.
	assumedPods sets.Set[types.UID]
	// podStates holds every pod the cache counts, assumed or confirmed.
	podStates map[types.UID]*podState
	// nodes holds a NodeInfo per node name; a node deleted while pods are
	// still counted on it stays with a nil Node until they are gone.
	nodes map[string]*nodeInfoListItem
	// headNode is the most recently changed NodeInfo; the list continues in
	// decreasing generation order.
	headNode *nodeInfoListItem
	nodeTree *nodeTree
	// imageStates maps an image name to its size and the nodes that have it.
	imageStates map[string]*framework.ImageStateSummary

	// podGroups is set when the cache tracks pod groups (WithPodGroups).
	podGroups bool
	// podGroupStates holds a state per pod group some pod names or whose
	// PodGroup exists.
	podGroupStates map[framework.EntityKey]*podGroupState
	// podGroupList holds the same states, most recently changed first, so
	// a snapshot copies only those that changed since it was updated.
	podGroupList *list.List
	// podGroupGeneration is the generation of the last pod group change.
	podGroupGeneration int64
}

// New returns an empty cache.
func New(opts ...Option) *Cache {
	c := &Cache{
		ttl:         DefaultAssumedPodTTL,
		clock:       clock.RealClock{},
		assumedPods: sets.New[types.UID](),
		podStates:   make(map[types.UID]*podState),
		nodes:       make(map[string]*nodeInfoListItem),
		nodeTree:    newNodeTree(),
		imageStates: make(map[string]*framework.ImageStateSummary),

		podGroupStates: make(map[framework.EntityKey]*podGroupState),
		podGroupList:   list.New(),
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Run expires assumed pods until ctx ends.
func (c *Cache) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	t := c.clock.NewTicker(cleanupPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			c.cleanupAssumedPods(logger, c.clock.Now())
		}
	}
}

// moveNodeInfoToHead puts the NodeInfo of name at the head of the list. The
// caller has just bumped its generation, which keeps the list sorted.
func (c *Cache) moveNodeInfoToHead(logger klog.Logger, name string) {
	item, ok := c.nodes[name]
	if !ok {
		logger.Error(nil, "No NodeInfo with this name in the cache", "node", klog.KRef("", name))
		return
	}
	if item == c.headNode {
		return
	}
	if item.prev != nil {
		item.prev.next = item.next
	}
	if item.next != nil {
		item.next.prev = item.prev
	}
	if c.headNode != nil {
		c.headNode.prev = item
	}
	item.next = c.headNode
	item.prev = nil
	c.headNode = item
}

// removeNodeInfoFromList unlinks and forgets the NodeInfo of name.
func (c *Cache) removeNodeInfoFromList(logger klog.Logger, name string) {
	item, ok := c.nodes[name]
	if !ok {
		logger.Error(nil, "No NodeInfo with this name in the cache", "node", klog.KRef("", name))
		return
	}
	if item.prev != nil {
		item.prev.next = item.next
	}
	if item.next != nil {
		item.next.prev = item.prev
	}
	if item == c.headNode {
		c.headNode = item.next
	}
	delete(c.nodes, name)
}

// UpdateSnapshot brings s up to date. Only NodeInfos that changed since s
// was last updated are copied; the node list is rebuilt only when nodes
// were added or removed. The snapshot holds only nodes whose Node object
// exists.
func (c *Cache) UpdateSnapshot(logger klog.Logger, s *Snapshot) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	// A pod-group cycle reverts what it assumed in s; should it not have,
	// the nodes it changed would never be copied again.
	s.forgetAllAssumedPods(logger)
	s.endLeftoverMutations(logger)

	// The node list must be rebuilt when a node was added or removed.
	updateAllLists := false
	// The affinity lists must be rebuilt when a node gained its first, or
	// lost its last, pod with (anti-)affinity.
	updateAffinityLists := false

	s.copied = 0
	for item := c.headNode; item != nil && item.info.Generation > s.generation; item = item.next {
		node := item.info.Node()
		if node == nil {
			// A deleted node with pods left; removed from s below.
			continue
		}
		existing, ok := s.nodeInfoMap[node.Name]
		if !ok {
			updateAllLists = true
			existing = &framework.NodeInfo{}
			s.nodeInfoMap[node.Name] = existing
		}
		clone := item.info.Snapshot()
		if (len(existing.PodsWithAffinity) > 0) != (len(clone.PodsWithAffinity) > 0) ||
			(len(existing.PodsWithRequiredAntiAffinity) > 0) != (len(clone.PodsWithRequiredAntiAffinity) > 0) {
			updateAffinityLists = true
		}
		s.countPVCs(existing, -1)
		s.countPVCs(clone, 1)
		// Overwrite in place: the lists hold this pointer.
		*existing = *clone
		s.copied++
	}
	if c.headNode != nil {
		s.generation = c.headNode.info.Generation
	}
	c.updatePodGroupSnapshot(s)

	// Deleted nodes leave the tree at once but may stay in c.nodes while
	// pods are counted on them.
	if len(s.nodeInfoMap) > c.nodeTree.numNodes {
		c.removeDeletedNodesFromSnapshot(s)
		updateAllLists = true
	}
	if updateAllLists || updateAffinityLists {
		c.updateSnapshotLists(logger, s, updateAllLists)
	}
	if len(s.nodeInfoList) != c.nodeTree.numNodes {
		msg := fmt.Sprintf("snapshot is inconsistent: %d nodes listed, %d nodes in the tree, %d in the snapshot map, %d in the cache; rebuilding",
			len(s.nodeInfoList), c.nodeTree.numNodes, len(s.nodeInfoMap), len(c.nodes))
		logger.Error(nil, msg)
		// Rebuild for the next cycle but fail this one: it may have seen a
		// partial list.
		c.updateSnapshotLists(logger, s, true)
		return errors.New(msg)
	}
	return nil
}

func (c *Cache) removeDeletedNodesFromSnapshot(s *Snapshot) {
	toDelete := len(s.nodeInfoMap) - c.nodeTree.numNodes
	for name, ni := range s.nodeInfoMap {
		if toDelete <= 0 {
			break
		}
		if item, ok := c.nodes[name]; !ok || item.info.Node() == nil {
			s.countPVCs(ni, -1)
			delete(s.nodeInfoMap, name)
			toDelete--
		}
	}
}

// updateSnapshotLists rebuilds the affinity lists and, with all set, the
// node list in node-tree order. New slices are allocated rather than the
// old ones overwritten, so a slice handed out earlier never changes under
// its holder.
func (c *Cache) updateSnapshotLists(logger klog.Logger, s *Snapshot, all bool) {
	if all {
		names, err := c.nodeTree.list()
		if err != nil {
			logger.Error(err, "Listing the node tree")
		}
		list := make([]*framework.NodeInfo, 0, len(names))
		for _, name := range names {
			ni := s.nodeInfoMap[name]
			if ni == nil {
				logger.Error(nil, "Node is in the node tree but not in the snapshot", "node", klog.KRef("", name))
				continue
			}
			list = append(list, ni)
		}
		s.nodeInfoList = list
	}
	var withAffinity, withAntiAffinity []*framework.NodeInfo
	for _, ni := range s.nodeInfoList {
		if len(ni.PodsWithAffinity) > 0 {
			withAffinity = append(withAffinity, ni)
		}
		if len(ni.PodsWithRequiredAntiAffinity) > 0 {
			withAntiAffinity = append(withAntiAffinity, ni)
		}
	}
	s.havePodsWithAffinityNodeInfoList = withAffinity
	s.havePodsWithRequiredAntiAffinityNodeInfoList = withAntiAffinity
}

// AssumePod counts pi on pi.Pod.Spec.NodeName until the bound pod arrives
// (AddPod), the binding fails (ForgetPod) or it expires. The cache keeps
// pi: it must not be modified afterwards.
func (c *Cache) AssumePod(logger klog.Logger, pi *framework.PodInfo) error {
	pod := pi.Pod
	if pod.Spec.NodeName == "" {
		return fmt.Errorf("pod %v(%v) has no node to be assumed on", pod.UID, klog.KObj(pod))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.podStates[pod.UID]; ok {
		return fmt.Errorf("pod %v(%v) is in the cache, so can't be assumed", pod.UID, klog.KObj(pod))
	}
	c.addPodInfo(logger, pi)
	c.assumedPods.Insert(pod.UID)
	c.assumePodGroupMember(pod)
	return nil
}

// FinishBinding starts the expiry clock of an assumed pod whose binding
// call returned. A pod that is no longer assumed is left alone.
func (c *Cache) FinishBinding(logger klog.Logger, pod *v1.Pod) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	logger.V(5).Info("Finished binding for pod, can be expired", "podKey", pod.UID, "pod", klog.KObj(pod))
	ps, ok := c.podStates[pod.UID]
	if ok && c.assumedPods.Has(pod.UID) {
		ps.bindingFinished = true
		if c.ttl > 0 {
			dl := c.clock.Now().Add(c.ttl)
			ps.deadline = &dl
		}
	}
	return nil
}

// ForgetPod releases an assumed pod whose binding failed; the pod still
// exists, so in its pod group it is unscheduled again.
func (c *Cache) ForgetPod(logger klog.Logger, pod *v1.Pod) error {
	return c.releaseAssumedPod(logger, pod, true)
}

// RemoveAssumedPod releases an assumed pod that was deleted while it was
// being bound; unlike ForgetPod, it leaves its pod group.
func (c *Cache) RemoveAssumedPod(logger klog.Logger, pod *v1.Pod) error {
	return c.releaseAssumedPod(logger, pod, false)
}

func (c *Cache) releaseAssumedPod(logger klog.Logger, pod *v1.Pod, forget bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, ok := c.podStates[pod.UID]
	if ok && ps.pod.Spec.NodeName != pod.Spec.NodeName {
		return fmt.Errorf("pod %v(%v) was assumed on %v but assigned to %v", pod.UID, klog.KObj(pod), pod.Spec.NodeName, ps.pod.Spec.NodeName)
	}
	if !ok || !c.assumedPods.Has(pod.UID) {
		return fmt.Errorf("pod %v(%v) wasn't assumed so cannot be forgotten", pod.UID, klog.KObj(pod))
	}
	c.removePod(logger, ps.pod)
	if forget {
		c.forgetPodGroupMember(logger, ps.pod)
	} else {
		c.removePodGroupMember(ps.pod)
	}
	return nil
}

// AddPod records a pod bound to a node, as the informer reports it. For an
// assumed pod this is the confirmation: the assumed copy is replaced by the
// real pod and will no longer expire.
func (c *Cache) AddPod(logger klog.Logger, pod *v1.Pod) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, ok := c.podStates[pod.UID]
	switch {
	case ok && c.assumedPods.Has(pod.UID):
		if ps.pod.Spec.NodeName != pod.Spec.NodeName {
			// Bound elsewhere than assumed (e.g. by another scheduler after
			// a lost leadership): count it where it really is.
			logger.Info("Pod was added to a different node than it was assumed", "podKey", pod.UID, "pod", klog.KObj(pod), "assumedNode", ps.pod.Spec.NodeName, "currentNode", pod.Spec.NodeName)
		}
		c.updatePod(logger, ps.pod, pod)
	case !ok:
		// New, or an assumed pod that expired before its event arrived.
		c.addPod(logger, pod)
	default:
		return fmt.Errorf("pod %v(%v) was already in added state", pod.UID, klog.KObj(pod))
	}
	return nil
}

// UpdatePod records a change of a bound pod.
func (c *Cache) UpdatePod(logger klog.Logger, oldPod, newPod *v1.Pod) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, ok := c.podStates[oldPod.UID]
	if !ok {
		return fmt.Errorf("pod %v(%v) is not added to scheduler cache, so cannot be updated", oldPod.UID, klog.KObj(oldPod))
	}
	// An assumed pod gets an Add (its confirmation) before any Update.
	if c.assumedPods.Has(oldPod.UID) {
		return fmt.Errorf("assumed pod %v(%v) should not be updated", oldPod.UID, klog.KObj(oldPod))
	}
	if ps.pod.Spec.NodeName != newPod.Spec.NodeName {
		// spec.nodeName cannot change once set; move it anyway so the
		// accounting follows what the API says.
		logger.Error(nil, "Pod updated on a different node than previously added to", "podKey", oldPod.UID, "pod", klog.KObj(oldPod), "node", ps.pod.Spec.NodeName, "newNode", newPod.Spec.NodeName)
	}
	c.updatePod(logger, ps.pod, newPod)
	return nil
}

// RemovePod releases a pod that was deleted or finished.
func (c *Cache) RemovePod(logger klog.Logger, pod *v1.Pod) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, ok := c.podStates[pod.UID]
	if !ok {
		return fmt.Errorf("pod %v(%v) is not found in scheduler cache, so cannot be removed from it", pod.UID, klog.KObj(pod))
	}
	if ps.pod.Spec.NodeName != pod.Spec.NodeName {
		logger.Error(nil, "Pod was added to a different node than it was assumed", "podKey", pod.UID, "pod", klog.KObj(pod), "assumedNode", ps.pod.Spec.NodeName, "currentNode", pod.Spec.NodeName)
	}
	c.removePod(logger, ps.pod)
	c.removePodGroupMember(ps.pod)
	return nil
}

// IsAssumedPod reports whether pod is assumed and not yet confirmed.
func (c *Cache) IsAssumedPod(pod *v1.Pod) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.assumedPods.Has(pod.UID)
}

// GetPod returns the cached version of pod (matched by UID).
func (c *Cache) GetPod(pod *v1.Pod) (*v1.Pod, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ps, ok := c.podStates[pod.UID]
	if !ok {
		return nil, fmt.Errorf("pod %v(%v) does not exist in scheduler cache", pod.UID, klog.KObj(pod))
	}
	return ps.pod, nil
}

// addPodInfo counts pi on its node; the caller holds the lock.
func (c *Cache) addPodInfo(logger klog.Logger, pi *framework.PodInfo) {
	name := pi.Pod.Spec.NodeName
	item, ok := c.nodes[name]
	if !ok {
		// Pods may arrive before their node.
		item = &nodeInfoListItem{info: framework.NewNodeInfo()}
		c.nodes[name] = item
	}
	item.info.AddPodInfo(pi)
	c.moveNodeInfoToHead(logger, name)
	c.podStates[pi.Pod.UID] = &podState{pod: pi.Pod}
}

func (c *Cache) addPod(logger klog.Logger, pod *v1.Pod) {
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		// The API server accepts selectors the scheduler cannot parse;
		// the pod still takes its resources.
		logger.V(4).Info("Parsing the pod's affinity terms", "pod", klog.KObj(pod), "err", err)
	}
	c.addPodInfo(logger, pi)
	c.addPodGroupMember(pod)
}

func (c *Cache) updatePod(logger klog.Logger, oldPod, newPod *v1.Pod) {
	c.removePod(logger, oldPod)
	c.removePodGroupMember(oldPod)
	c.addPod(logger, newPod)
}

// removePod uncounts pod (assumed or not) and forgets it, but not in its pod
// group: removed and forgotten pods differ there. The caller holds the lock.
func (c *Cache) removePod(logger klog.Logger, pod *v1.Pod) {
	name := pod.Spec.NodeName
	if item, ok := c.nodes[name]; !ok {
		logger.Error(nil, "Node not found when trying to remove pod", "node", klog.KRef("", name), "podKey", pod.UID, "pod", klog.KObj(pod))
	} else {
		if err := item.info.RemovePod(logger, pod); err != nil {
			logger.Error(err, "Removing pod from its node", "pod", klog.KObj(pod), "node", klog.KRef("", name))
		}
		if len(item.info.Pods) == 0 && item.info.Node() == nil {
			c.removeNodeInfoFromList(logger, name)
		} else {
			c.moveNodeInfoToHead(logger, name)
		}
	}
	delete(c.podStates, pod.UID)
	c.assumedPods.Delete(pod.UID)
}

// AddNode records a node.
func (c *Cache) AddNode(logger klog.Logger, node *v1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	item, ok := c.nodes[node.Name]
	if !ok {
		item = &nodeInfoListItem{info: framework.NewNodeInfo()}
		c.nodes[node.Name] = item
	} else {
		c.removeNodeImageStates(item.info.Node())
	}
	c.nodeTree.addNode(logger, node)
	c.setNode(logger, item, node)
}

// UpdateNode records a change of a node.
func (c *Cache) UpdateNode(logger klog.Logger, oldNode, newNode *v1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	item, ok := c.nodes[newNode.Name]
	if !ok {
		item = &nodeInfoListItem{info: framework.NewNodeInfo()}
		c.nodes[newNode.Name] = item
		c.nodeTree.addNode(logger, newNode)
	} else {
		c.removeNodeImageStates(item.info.Node())
		c.nodeTree.updateNode(logger, item.info.Node(), newNode)
	}
	c.setNode(logger, item, newNode)
}

func (c *Cache) setNode(logger klog.Logger, item *nodeInfoListItem, node *v1.Node) {
	c.addNodeImageStates(node, item.info)
	item.info.SetNode(node)
	c.moveNodeInfoToHead(logger, node.Name)
}

// RemoveNode forgets a node. Pods still counted on it keep its NodeInfo
// (without a Node, so it is never a candidate) until they are removed too.
func (c *Cache) RemoveNode(logger klog.Logger, node *v1.Node) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	item, ok := c.nodes[node.Name]
	if !ok {
		return fmt.Errorf("node %v is not found", node.Name)
	}
	item.info.RemoveNode()
	if len(item.info.Pods) == 0 {
		c.removeNodeInfoFromList(logger, node.Name)
	} else {
		c.moveNodeInfoToHead(logger, node.Name)
	}
	if err := c.nodeTree.removeNode(logger, node); err != nil {
		return err
	}
	c.removeNodeImageStates(node)
	return nil
}

// addNodeImageStates points the NodeInfo at the shared summaries of the
// node's images, creating them as needed.
func (c *Cache) addNodeImageStates(node *v1.Node, ni *framework.NodeInfo) {
	states := make(map[string]*framework.ImageStateSummary)
	for _, image := range node.Status.Images {
		for _, name := range image.Names {
			st, ok := c.imageStates[name]
			if !ok {
				st = &framework.ImageStateSummary{Size: image.SizeBytes, Nodes: sets.New(node.Name)}
				c.imageStates[name] = st
			} else {
				st.Nodes.Insert(node.Name)
			}
			states[name] = st
		}
	}
	ni.ImageStates = states
}

func (c *Cache) removeNodeImageStates(node *v1.Node) {
	if node == nil {
		return
	}
	for _, image := range node.Status.Images {
		for _, name := range image.Names {
			st, ok := c.imageStates[name]
			if !ok {
				continue
			}
			st.Nodes.Delete(node.Name)
			if st.Nodes.Len() == 0 {
				delete(c.imageStates, name)
			}
		}
	}
}

// cleanupAssumedPods expires assumed pods whose binding finished more than
// the TTL before now.
func (c *Cache) cleanupAssumedPods(logger klog.Logger, now time.Time) {
	var expired []*v1.Pod
	c.mu.Lock()
	for uid := range c.assumedPods {
		ps, ok := c.podStates[uid]
		if !ok {
			logger.Error(nil, "Assumed pod has no state in the cache", "podKey", uid)
			c.assumedPods.Delete(uid)
			continue
		}
		if !ps.bindingFinished || ps.deadline == nil || !now.After(*ps.deadline) {
			continue
		}
		logger.Info("Assumed pod expired: its binding never showed up", "pod", klog.KObj(ps.pod), "node", ps.pod.Spec.NodeName)
		c.removePod(logger, ps.pod)
		c.removePodGroupMember(ps.pod)
		expired = append(expired, ps.pod)
	}
	c.mu.Unlock()
	if c.onExpire != nil {
		for _, p := range expired {
			c.onExpire(logger, p)
		}
	}
}

// NodeCount returns the number of nodes with a Node object.
func (c *Cache) NodeCount() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.nodeTree.numNodes
}

// PodCount returns the number of pods counted, assumed ones included.
func (c *Cache) PodCount() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.podStates)
}

// AssumedPodCount returns the number of assumed, unconfirmed pods.
func (c *Cache) AssumedPodCount() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.assumedPods.Len()
}
