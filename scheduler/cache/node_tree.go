package cache

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/node/topology"
	"k8s.io/klog/v2"
)

// nodeTree groups node names by zone (region and zone labels) so that the
// node list used for the search takes one node from each zone in turn. The
// filter loop stops after a percentage of the nodes; without the interleave a
// partial search would favour whichever zone was listed first.
//
// It is not safe for concurrent use; Cache guards it with its lock.
type nodeTree struct {
	// tree maps a zone key to the names of its nodes, in insertion order.
	tree map[string][]string
	// zones lists the keys of tree in insertion order, which fixes the
	// order of the interleave.
	zones    []string
	numNodes int
}

func newNodeTree() *nodeTree {
	return &nodeTree{tree: make(map[string][]string)}
}

func (nt *nodeTree) addNode(logger klog.Logger, n *v1.Node) {
	zone := topology.GetZoneKey(n)
	if names, ok := nt.tree[zone]; ok {
		for _, name := range names {
			if name == n.Name {
				logger.V(4).Info("Node is already in the node tree", "node", klog.KObj(n), "zone", zone)
				return
			}
		}
		nt.tree[zone] = append(names, n.Name)
	} else {
		nt.zones = append(nt.zones, zone)
		nt.tree[zone] = []string{n.Name}
	}
	nt.numNodes++
}

func (nt *nodeTree) removeNode(logger klog.Logger, n *v1.Node) error {
	zone := topology.GetZoneKey(n)
	names := nt.tree[zone]
	for i, name := range names {
		if name != n.Name {
			continue
		}
		nt.tree[zone] = append(names[:i], names[i+1:]...)
		if len(nt.tree[zone]) == 0 {
			nt.removeZone(zone)
		}
		nt.numNodes--
		return nil
	}
	logger.Error(nil, "Node to remove is not in the node tree", "node", klog.KObj(n), "zone", zone)
	return fmt.Errorf("node %q in zone %q was not found", n.Name, zone)
}

func (nt *nodeTree) removeZone(zone string) {
	delete(nt.tree, zone)
	for i, z := range nt.zones {
		if z == zone {
			nt.zones = append(nt.zones[:i], nt.zones[i+1:]...)
			return
		}
	}
}

// updateNode moves the node when its zone labels changed; a node's name
// cannot change.
func (nt *nodeTree) updateNode(logger klog.Logger, oldNode, newNode *v1.Node) {
	if oldNode != nil {
		if topology.GetZoneKey(oldNode) == topology.GetZoneKey(newNode) {
			return
		}
		// The old node may be missing (an update racing a delete); that is
		// logged and the node is added anyway.
		_ = nt.removeNode(logger, oldNode)
	}
	nt.addNode(logger, newNode)
}

// list returns the node names interleaved across zones: the first node of
// every zone, then the second of every zone, and so on.
func (nt *nodeTree) list() ([]string, error) {
	if len(nt.zones) == 0 {
		return nil, nil
	}
	out := make([]string, 0, nt.numNodes)
	exhausted := 0
	for i := 0; len(out) < nt.numNodes; i++ {
		if exhausted >= len(nt.zones) {
			return out, errors.New("all zones exhausted before reaching the number of nodes")
		}
		for _, zone := range nt.zones {
			names := nt.tree[zone]
			if i >= len(names) {
				if i == len(names) {
					exhausted++
				}
				continue
			}
			out = append(out, names[i])
		}
	}
	return out, nil
}
