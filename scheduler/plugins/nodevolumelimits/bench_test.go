package nodevolumelimits

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

// benchCluster is st.BenchNodes nodes, each with a CSINode limiting
// testDriver to 40 volumes and ebsDriver to 25, two pods using two bound
// CSI claims each and one in-tree EBS claim, and one VolumeAttachment.
func benchCluster() ([]*v1.Node, []*v1.Pod, []k8sruntime.Object) {
	limit, ebsLimit := int32(40), int32(25)
	nodes := st.MakeNodes(st.BenchNodes, func(i int) *v1.Node { return st.MakeNode().Name(fmt.Sprintf("node-%d", i)).Obj() })
	var pods []*v1.Pod
	objs := []k8sruntime.Object{
		st.MakeStorageClass("csi-sc").Provisioner(testDriver).WaitForFirstConsumer().Obj(),
		st.MakePVC(ns, "unbound").StorageClass("csi-sc").Obj(),
		st.MakePV("pv-new-0").CSI(testDriver, "new-0").Obj(), st.MakePVC(ns, "new-0").Bound("pv-new-0").Obj(),
		st.MakePV("pv-new-1").CSI(testDriver, "new-1").Obj(), st.MakePVC(ns, "new-1").Bound("pv-new-1").Obj(),
	}
	for i, n := range nodes {
		objs = append(objs, csiNode(n.Name, map[string]*int32{testDriver: &limit, ebsDriver: &ebsLimit}))
		for j := range 2 {
			p := st.MakePod().Name(fmt.Sprintf("p-%d-%d", i, j)).Node(n.Name)
			for k := range 2 {
				name := fmt.Sprintf("c-%d-%d-%d", i, j, k)
				objs = append(objs, st.MakePV("pv-"+name).CSI(testDriver, name).Obj(), st.MakePVC(ns, name).Bound("pv-"+name).Obj())
				p.PVC(name)
			}
			ebs := fmt.Sprintf("ebs-%d-%d", i, j)
			objs = append(objs, st.MakePV("pv-"+ebs).AWSEBS("vol-"+ebs).Obj(), st.MakePVC(ns, ebs).Bound("pv-"+ebs).Obj())
			pods = append(pods, p.PVC(ebs).Obj())
		}
		va := fmt.Sprintf("va-%d", i)
		objs = append(objs, st.MakePV("pv-"+va).CSI(testDriver, va).Obj(), volumeAttachment(va, testDriver, "pv-"+va, n.Name))
	}
	return nodes, pods, objs
}

// BenchmarkFilter measures one pod's PreFilter and Filter over every node.
func BenchmarkFilter(b *testing.B) {
	nodes, pods, objs := benchCluster()
	snapshot := st.NewSnapshot(pods, nodes)
	fwk := newFramework(b, snapshot, objs...)
	cases := map[string]*v1.Pod{
		"three claims":    incoming("new-0", "new-1", "unbound").Obj(),
		"inline EBS":      st.MakePod().Name("incoming").Volume(ebsInline("ebs", "vol-new")).Obj(),
		"no volumes skip": st.MakePod().Name("incoming").Obj(),
	}
	for name, pod := range cases {
		b.Run(name, func(b *testing.B) {
			st.BenchmarkFilter(b, fwk, snapshot, pod)
		})
	}
}
