// Command kube-apiserver-harness runs a real kube-apiserver with an embedded
// etcd in one process, for kube-apf-proxy's tests. It is built from Go modules
// only (no prebuilt binary) by scripts/kube-apiserver.sh, which also owns the
// contract of the files it writes.
//
//	kube-apiserver-harness pki DIR
//	    writes the certificates and keys the script needs into DIR (kept when
//	    already there).
//	kube-apiserver-harness client-cert CA_CRT CA_KEY OUT USER [GROUP...]
//	    writes OUT.crt and OUT.key: a client certificate (CN USER, O GROUP...)
//	    signed by that CA.
//	kube-apiserver-harness free-port
//	    prints a TCP port free on 127.0.0.1.
//	kube-apiserver-harness wait-ready URL CA_FILE SECONDS PID
//	    polls URL/readyz (trusting CA_FILE) until it answers 200; fails when
//	    SECONDS pass or process PID exits first.
//	kube-apiserver-harness serve --etcd-dir DIR [-- KUBE_APISERVER_FLAGS...]
//	    starts etcd on free loopback ports, then kube-apiserver with
//	    --etcd-servers pointing at it followed by the given flags. With
//	    KUBE_APISERVER_OWNER_PID set, it exits when that process is gone, so
//	    a test binary that dies never leaves an apiserver behind.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "pki":
		if len(os.Args) != 3 {
			usage()
		}
		if err := writePKI(os.Args[2]); err != nil {
			fmt.Fprintf(os.Stderr, "pki: %v\n", err)
			os.Exit(1)
		}
	case "client-cert":
		if len(os.Args) < 6 {
			usage()
		}
		if err := issueClientCert(os.Args[2], os.Args[3], os.Args[4], os.Args[5], os.Args[6:]); err != nil {
			fmt.Fprintf(os.Stderr, "client-cert: %v\n", err)
			os.Exit(1)
		}
	case "free-port":
		u, err := freeLoopbackURL()
		if err != nil {
			fmt.Fprintf(os.Stderr, "free-port: %v\n", err)
			os.Exit(1)
		}
		fmt.Println(u.Port())
	case "wait-ready":
		if len(os.Args) != 6 {
			usage()
		}
		if err := waitReady(os.Args[2], os.Args[3], os.Args[4], os.Args[5]); err != nil {
			fmt.Fprintf(os.Stderr, "wait-ready: %v\n", err)
			os.Exit(1)
		}
	case "serve":
		os.Exit(serve(os.Args[2:]))
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: kube-apiserver-harness pki DIR | client-cert CA_CRT CA_KEY OUT USER [GROUP...] | free-port | wait-ready URL CA_FILE SECONDS PID | serve --etcd-dir DIR [-- FLAGS...]")
	os.Exit(2)
}

// === serve ===

func serve(args []string) int {
	if len(args) < 2 || args[0] != "--etcd-dir" {
		usage()
	}
	etcdDir := args[1]
	rest := args[2:]
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}

	clientURL, err := freeLoopbackURL()
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 1
	}
	peerURL, err := freeLoopbackURL()
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 1
	}
	cfg := embed.NewConfig()
	cfg.Name = "harness"
	cfg.Dir = etcdDir
	cfg.ListenClientUrls = []url.URL{*clientURL}
	cfg.AdvertiseClientUrls = []url.URL{*clientURL}
	cfg.ListenPeerUrls = []url.URL{*peerURL}
	cfg.AdvertisePeerUrls = []url.URL{*peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{"stderr"}
	etcd, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 1
	}
	defer etcd.Close()
	select {
	case <-etcd.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		fmt.Fprintln(os.Stderr, "etcd: not ready after 60s")
		return 1
	}

	if owner := os.Getenv("KUBE_APISERVER_OWNER_PID"); owner != "" {
		pid, err := strconv.Atoi(owner)
		if err != nil {
			fmt.Fprintf(os.Stderr, "KUBE_APISERVER_OWNER_PID=%q: not a pid\n", owner)
			return 2
		}
		go func() {
			for processAlive(pid) {
				time.Sleep(500 * time.Millisecond)
			}
			// The data is the dead owner's scratch: exit at once, without etcd's
			// graceful close (seconds while the apiserver still holds its clients).
			fmt.Fprintf(os.Stderr, "harness: owner process %d is gone; exiting\n", pid)
			os.Exit(0)
		}()
	}

	command := app.NewAPIServerCommand()
	command.SetArgs(append([]string{"--etcd-servers=" + clientURL.String()}, rest...))
	return cli.Run(command)
}

// freeLoopbackURL finds a free TCP port on 127.0.0.1 by binding port 0.
func freeLoopbackURL() (*url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return nil, err
	}
	return &url.URL{Scheme: "http", Host: addr}, nil
}

// processAlive tells whether pid exists (signal 0).
func processAlive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// === wait-ready ===

func waitReady(server, caFile, seconds, pidText string) error {
	limit, err := strconv.Atoi(seconds)
	if err != nil {
		return fmt.Errorf("SECONDS %q: %v", seconds, err)
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil {
		return fmt.Errorf("PID %q: %v", pidText, err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("%s: no certificate", caFile)
	}
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	deadline := time.Now().Add(time.Duration(limit) * time.Second)
	last := "no answer yet"
	for time.Now().Before(deadline) {
		if !processAlive(pid) {
			return fmt.Errorf("process %d exited before %s/readyz answered 200 (last: %s)", pid, server, last)
		}
		resp, err := client.Get(server + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s/readyz did not answer 200 within %ds (last: %s)", server, limit, last)
}

// === pki ===

type keyPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func writePKI(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "pki-done")); err == nil {
		return nil
	}

	servingCA, err := newCA("kube-apiserver-harness-ca")
	if err != nil {
		return err
	}
	clientCA, err := newCA("kube-apiserver-harness-client-ca")
	if err != nil {
		return err
	}
	frontProxyCA, err := newCA("kube-apiserver-harness-front-proxy-ca")
	if err != nil {
		return err
	}
	serving, err := newLeaf(servingCA, pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.0.0.1")})
	if err != nil {
		return err
	}
	admin, err := newLeaf(clientCA, pkix.Name{CommonName: "kubernetes-admin", Organization: []string{"system:masters"}},
		x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return err
	}
	frontProxyClient, err := newLeaf(frontProxyCA, pkix.Name{CommonName: "front-proxy-client"},
		x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}

	files := []struct {
		name string
		pem  []byte
	}{
		{"ca.crt", certPEM(servingCA)},
		{"ca.key", keyPEM(servingCA)},
		{"serving.crt", certPEM(serving)},
		{"serving.key", keyPEM(serving)},
		{"client-ca.crt", certPEM(clientCA)},
		{"client-ca.key", keyPEM(clientCA)},
		{"admin.crt", certPEM(admin)},
		{"admin.key", keyPEM(admin)},
		{"front-proxy-ca.crt", certPEM(frontProxyCA)},
		{"front-proxy-ca.key", keyPEM(frontProxyCA)},
		{"front-proxy-client.crt", certPEM(frontProxyClient)},
		{"front-proxy-client.key", keyPEM(frontProxyClient)},
		{"sa.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)})},
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	files = append(files, struct {
		name string
		pem  []byte
	}{"sa.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})})
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.pem, 0o600); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "pki-done"), nil, 0o600)
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
}

func newCA(cn string) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}

func newLeaf(ca *keyPair, subject pkix.Name, usage x509.ExtKeyUsage, dns []string, ips []net.IP) (*keyPair, error) {
	if ca == nil {
		return nil, errors.New("no CA")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}

func certPEM(kp *keyPair) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kp.cert.Raw})
}

// keyPEM is PKCS#8 ("PRIVATE KEY"), which Go, openssl, rustls and rcgen all read.
func keyPEM(kp *keyPair) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(kp.key)
	if err != nil {
		// An ECDSA P-256 key generated above always marshals.
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// === client-cert ===

// issueClientCert signs a client certificate (CN user, O groups) with the CA in
// caCert/caKey and writes out.crt and out.key.
func issueClientCert(caCert, caKey, out, user string, groups []string) error {
	certPEMBytes, err := os.ReadFile(caCert)
	if err != nil {
		return err
	}
	block, _ := pem.Decode(certPEMBytes)
	if block == nil {
		return fmt.Errorf("%s: no PEM certificate", caCert)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("%s: %v", caCert, err)
	}
	keyPEMBytes, err := os.ReadFile(caKey)
	if err != nil {
		return err
	}
	block, _ = pem.Decode(keyPEMBytes)
	if block == nil {
		return fmt.Errorf("%s: no PEM key", caKey)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return fmt.Errorf("%s: %v", caKey, err)
	}
	key, ok := parsed.(*ecdsa.PrivateKey)
	if !ok {
		return fmt.Errorf("%s: not an ECDSA key", caKey)
	}
	leaf, err := newLeaf(&keyPair{cert: cert, key: key}, pkix.Name{CommonName: user, Organization: groups},
		x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out+".crt", certPEM(leaf), 0o600); err != nil {
		return err
	}
	return os.WriteFile(out+".key", keyPEM(leaf), 0o600)
}
