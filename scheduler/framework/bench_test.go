package framework

import (
	"fmt"
	"testing"
)

// BenchmarkCycleStateClone clones a state holding as many entries as the
// default profile writes in PreFilter/PreScore (about a dozen).
func BenchmarkCycleStateClone(b *testing.B) {
	cs := NewCycleState()
	for i := 0; i < 12; i++ {
		cs.Write(StateKey(fmt.Sprint("PreFilterPlugin", i)), &intState{v: i})
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = cs.Clone()
	}
}

func BenchmarkCycleStateRead(b *testing.B) {
	cs := NewCycleState()
	for i := 0; i < 12; i++ {
		cs.Write(StateKey(fmt.Sprint("PreFilterPlugin", i)), &intState{v: i})
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := cs.Read("PreFilterPlugin5"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
