package scheduler

// closestName returns the name of names that name is most likely a typo
// of, or "" when none is close: at most two single-character edits
// (insertions, deletions, substitutions) away, and at most one for a name
// shorter than 8 characters. Short names are too close to one another for
// more: "gpu" and "cpu" may well be two schedulers. The first of equally
// close names wins.
func closestName(name string, names []string) string {
	best, bestDistance := "", 3
	for _, n := range names {
		limit := min(2, len(n)/4, bestDistance-1)
		if n == name || limit < 1 {
			continue
		}
		if d, ok := editDistance(name, n, limit); ok {
			best, bestDistance = n, d
		}
	}
	return best
}

// editDistance returns the Levenshtein distance of a and b, byte by byte
// (schedulerNames are DNS subdomains, ASCII), when it is at most limit.
// It works in a band of 2*limit+1 cells around the diagonal, so its cost
// grows with the names' length, not with its square.
func editDistance(a, b string, limit int) (int, bool) {
	if len(a)-len(b) > limit || len(b)-len(a) > limit {
		return 0, false
	}
	// far stands for any distance beyond limit.
	far := limit + 1
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = min(j, far)
	}
	for i := 1; i <= len(a); i++ {
		lo, hi := max(1, i-limit), min(len(b), i+limit)
		cur[lo-1] = far
		if lo == 1 {
			cur[0] = min(i, far)
		}
		rowMin := cur[lo-1]
		for j := lo; j <= hi; j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			c := min(prev[j-1]+cost, prev[j]+1, cur[j-1]+1, far)
			cur[j] = c
			rowMin = min(rowMin, c)
		}
		if hi < len(b) {
			cur[hi+1] = far
		}
		if rowMin >= far {
			return 0, false
		}
		prev, cur = cur, prev
	}
	if d := prev[len(b)]; d <= limit {
		return d, true
	}
	return 0, false
}
