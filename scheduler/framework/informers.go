package framework

import "k8s.io/client-go/tools/cache"

// AddIndex adds the index name, computed by fn, to informer unless it has
// it already, and reports whether it has it afterwards; when it has not,
// the error says why (an informer that already runs may refuse a new
// index). The informers are shared by every profile's plugin instances and
// by the operator's controllers, which may add the same index at once: the
// informer's map of indexers may only be read under its lock, so presence
// is asked with ByIndex, never read from GetIndexers.
func AddIndex(informer cache.SharedIndexInformer, name string, fn cache.IndexFunc) (bool, error) {
	has := func() bool {
		_, err := informer.GetIndexer().ByIndex(name, "")
		return err == nil
	}
	if has() {
		return true, nil
	}
	if err := informer.AddIndexers(cache.Indexers{name: fn}); err != nil && !has() {
		return false, err
	}
	return true, nil
}
