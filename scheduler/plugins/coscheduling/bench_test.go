package coscheduling

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// BenchmarkPermitWaitingMember is the scheduling cycle's cost of a member
// that waits for its gang, with 50 gangs of 8 members waiting for their
// tenth: Permit, the HoldChanged that counts the gang, and the bookkeeping
// of a waiting pod.
func BenchmarkPermitWaitingMember(b *testing.B) {
	const gangs, waiting, minMember = 50, 8, 10
	var pgs []*v1.Pod
	g := groups{}
	for i := range gangs {
		pg := group(fmt.Sprintf("g%d", i), minMember)
		g[pg.Namespace+"/"+pg.Name] = pg
		for j := range minMember {
			pgs = append(pgs, member(fmt.Sprintf("g%d-m%d", i, j), pg.Name).Obj())
		}
	}
	e := newEnv(b, envConfig{groups: g, pods: pgs})
	ctx := context.Background()
	for i := range gangs {
		for _, p := range pgs[i*minMember : i*minMember+waiting] {
			if s := e.fwk.RunPermitPlugins(ctx, framework.NewCycleState(), p, "node-1"); !s.IsWait() {
				b.Fatalf("Permit(%s) = %v, want Wait", p.Name, s)
			}
		}
	}
	pod := pgs[waiting] // gang g0's ninth member: it waits too
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		state := framework.NewCycleState()
		state.Write(framework.PodsToActivateKey, framework.NewPodsToActivate())
		if s := e.fwk.RunPermitPlugins(ctx, state, pod, "node-1"); !s.IsWait() {
			b.Fatalf("Permit = %v, want Wait", s)
		}
		b.StopTimer()
		e.fwk.RejectWaitingPod(pod.UID)
		e.fwk.WaitOnPermit(ctx, pod)
		b.StartTimer()
	}
}
