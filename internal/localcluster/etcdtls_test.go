package localcluster_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// TestEtcdAnswersOnlyTheAPIServer starts a cluster and reads etcd's keys
// as another local user could: over plain HTTP, and over TLS without a
// client certificate, etcd answers nothing; with kube-apiserver's client
// certificate it does, and the cluster works.
func TestEtcdAnswersOnlyTheAPIServer(t *testing.T) {
	assets, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := localcluster.Start(localcluster.Options{AssetsDir: assets})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
	})
	// The cluster works: kube-apiserver reaches etcd.
	if _, err := cluster.Clientset.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("the API server does not work: %v", err)
	}

	endpoint, caFile, certFile, keyFile := localcluster.EtcdClientEndpoint(cluster)
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	// readKeys asks etcd's gRPC gateway for the keys under /registry/.
	readKeys := func(client *http.Client, url string) (string, error) {
		body := `{"key":"` + base64.StdEncoding.EncodeToString([]byte("/registry/")) + `","range_end":"` + base64.StdEncoding.EncodeToString([]byte("/registry0")) + `","keys_only":true}`
		resp, err := client.Post(url+"/v3/kv/range", "application/json", strings.NewReader(body))
		if err != nil {
			return "", err
		}
		defer func() { _ = resp.Body.Close() }()
		data, err := io.ReadAll(resp.Body)
		return resp.Status + " " + string(data), err
	}
	for name, client := range map[string]*http.Client{
		"no client certificate":        {Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}},
		"no client certificate, no CA": {Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}},
	} {
		if out, err := readKeys(client, endpoint); err == nil {
			t.Errorf("%s: etcd answered: %.200s", name, out)
		}
	}
	if out, err := readKeys(http.DefaultClient, strings.Replace(endpoint, "https://", "http://", 1)); err == nil && strings.Contains(out, `"kvs"`) {
		t.Errorf("plain HTTP: etcd answered: %.200s", out)
	}
	out, err := readKeys(&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}}}, endpoint)
	if err != nil || !strings.Contains(out, `"count"`) {
		t.Errorf("with the API server's certificate: %v %.200s", err, out)
	}
}
