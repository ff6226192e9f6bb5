package helper

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

const (
	// MaxUtilization is 100 percent, the top of a shape's utilization axis.
	MaxUtilization = 100
	// MaxCustomPriorityScore is the top of a shape's score axis in args;
	// BrokenLinear scales it to framework.MaxNodeScore.
	MaxCustomPriorityScore = 10
)

// BrokenLinear returns the piecewise-linear function through the points of
// a validated shape (NodeResourcesFit's RequestedToCapacityRatio,
// VolumeBinding's capacity scoring), with scores scaled to 0..MaxNodeScore:
// flat before the first and after the last point, integer interpolation in
// between, as upstream's BuildBrokenLinearFunction computes it.
func BrokenLinear(shape []configv1.UtilizationShapePoint) func(utilization int64) int64 {
	type point struct{ utilization, score int64 }
	points := make([]point, len(shape))
	for i, p := range shape {
		points[i] = point{int64(p.Utilization), int64(p.Score) * (framework.MaxNodeScore / MaxCustomPriorityScore)}
	}
	return func(u int64) int64 {
		for i := range points {
			if u <= points[i].utilization {
				if i == 0 {
					return points[0].score
				}
				a, b := points[i-1], points[i]
				return a.score + (b.score-a.score)*(u-a.utilization)/(b.utilization-a.utilization)
			}
		}
		return points[len(points)-1].score
	}
}

// ValidateShape is upstream's check of a shape: at least one point,
// utilization strictly increasing within [0, 100], scores within [0, 10].
func ValidateShape(shape []configv1.UtilizationShapePoint, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(shape) == 0 {
		return append(errs, field.Required(path, "at least one point must be specified"))
	}
	for i := 1; i < len(shape); i++ {
		if shape[i-1].Utilization >= shape[i].Utilization {
			errs = append(errs, field.Invalid(path.Index(i).Child("utilization"), shape[i].Utilization, "values must be sorted in increasing order"))
			break
		}
	}
	for i, p := range shape {
		if p.Utilization < 0 || p.Utilization > MaxUtilization {
			errs = append(errs, field.Invalid(path.Index(i).Child("utilization"), p.Utilization, fmt.Sprintf("not in valid range [%d, %d]", 0, MaxUtilization)))
		}
		if p.Score < 0 || p.Score > MaxCustomPriorityScore {
			errs = append(errs, field.Invalid(path.Index(i).Child("score"), p.Score, fmt.Sprintf("not in valid range [%d, %d]", 0, MaxCustomPriorityScore)))
		}
	}
	return errs
}
