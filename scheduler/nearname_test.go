package scheduler

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"

	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

func TestClosestName(t *testing.T) {
	served := []string{"approvals", "bin-packing", "gangs", "gpu", "gpu-gangs", "profile-scheduler"}
	for name, want := range map[string]string{
		"bin-packin":          "bin-packing",
		"bin-packign":         "bin-packing", // a transposition is two edits
		"binpacking":          "bin-packing",
		"bin_packing":         "bin-packing",
		"bin-pack":            "",
		"profile-schedular":   "profile-scheduler",
		"gang":                "gangs",
		"gan":                 "",
		"cpu":                 "", // too short to be a typo of gpu
		"gpu-gang":            "gpu-gangs",
		"bin-packing":         "",
		"default-scheduler":   "",
		"other-scheduler":     "",
		"":                    "",
		"approval":            "approvals",
		"a-very-long-unknown": "",
	} {
		if got := closestName(name, served); got != want {
			t.Errorf("closestName(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestEditDistance checks the banded distance against the textbook one on
// random names.
func TestEditDistance(t *testing.T) {
	full := func(a, b string) int {
		prev := make([]int, len(b)+1)
		for j := range prev {
			prev[j] = j
		}
		for i := 1; i <= len(a); i++ {
			cur := make([]int, len(b)+1)
			cur[0] = i
			for j := 1; j <= len(b); j++ {
				cost := 1
				if a[i-1] == b[j-1] {
					cost = 0
				}
				cur[j] = min(prev[j-1]+cost, prev[j]+1, cur[j-1]+1)
			}
			prev = cur
		}
		return prev[len(b)]
	}
	r := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		var b strings.Builder
		for range r.IntN(9) {
			b.WriteByte("abc-"[r.IntN(4)])
		}
		return b.String()
	}
	for range 20000 {
		a, b, limit := word(), word(), r.IntN(4)
		want := full(a, b)
		got, ok := editDistance(a, b, limit)
		if ok != (want <= limit) || (ok && got != want) {
			t.Fatalf("editDistance(%q, %q, %d) = %d, %v; the distance is %d", a, b, limit, got, ok, want)
		}
	}
}

// TestUnservedTypoWarnings: a pod whose schedulerName is a likely typo of a
// served one is warned about once, with the suggestion; other schedulers'
// pods, reserved names included, never.
func TestUnservedTypoWarnings(t *testing.T) {
	served := []string{"bin-packing", "gangs"}
	gauge := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "unserved"}, []string{"scheduler_name"})
	u := newUnservedPods(gauge, func(name string) bool { return slices.Contains(served, name) }, []string{v1.DefaultSchedulerName, "gang"}, nil)
	u.start()
	for _, name := range []string{"bin-packin", "gang", "default-schedulr", v1.DefaultSchedulerName, "other", "bin-packing"} {
		u.add(st.MakePod().Name(name).UID(name).SchedulerName(name).Obj())
	}
	start := time.Now()
	// warned returns the pods due at now, each as its name and suggestion.
	warned := func(now time.Time) []string {
		var got []string
		for _, w := range u.due(now, 10*time.Second, served) {
			got = append(got, w.pod.Name+" "+w.suggestion)
		}
		return got
	}
	if got := warned(start); len(got) != 0 {
		t.Errorf("warned before the delay: %v", got)
	}
	if diff := cmp.Diff([]string{"bin-packin bin-packing"}, warned(start.Add(11*time.Second))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := warned(start.Add(time.Minute)); len(got) != 0 {
		t.Errorf("warned again: %v", got)
	}
	// A pod that comes later, of the same name, gets its own warning.
	u.add(st.MakePod().Name("second").UID("second").SchedulerName("bin-packin").Obj())
	if diff := cmp.Diff([]string{"second bin-packing"}, warned(time.Now().Add(11*time.Second))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
