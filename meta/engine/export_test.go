package engine

// LeaseForTest is the lease of e's term (0 before Campaign).
func (e *Etcd) LeaseForTest() int64 {
	if e.sess == nil {
		return 0
	}
	return int64(e.sess.Lease())
}

// DeafForTest has e not notice its lease ending, as a server stalled past
// it that has not run since.
func (e *Etcd) DeafForTest() { e.deaf.Store(true) }
