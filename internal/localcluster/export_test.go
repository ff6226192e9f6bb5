package localcluster

// EtcdClientEndpoint returns where the cluster's etcd serves its clients,
// with its CA and the client certificate and key kube-apiserver uses.
func EtcdClientEndpoint(c *Cluster) (url, caFile, certFile, keyFile string) {
	return c.etcd.clientURL.String(), c.etcd.caFile, c.etcd.clientCert, c.etcd.clientKey
}
