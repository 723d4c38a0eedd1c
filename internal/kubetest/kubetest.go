// Package kubetest starts a real Kubernetes control plane for tests, all on
// 127.0.0.1: etcd, kube-apiserver and an unmodified Kueue controller with its
// CRDs and webhooks, built from the Go module proxy by
// tools/build-k8s-stack.sh (the folder it prints goes in
// $GPULEDGER_K8S_STACK). No kubelet or scheduler runs: pods stay Pending,
// which is all admission needs. Tests start it with Start; `gpuledger
// sim-to-real` with Launch.
package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/internal/testenv"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Env names the variable that locates the built stack.
const Env = "GPULEDGER_K8S_STACK"

// startWithin bounds the stack's start, up to Kueue's controllers running
// (about 10 s on an idle 2-core machine, far longer beside CI's other
// packages); kueueWithin each of Kueue's two tries.
const (
	startWithin = 5 * time.Minute
	kueueWithin = 2 * time.Minute
)

// Options tunes the Kueue the stack runs.
type Options struct {
	// KueueConfig is appended to Kueue's Configuration (YAML at the top
	// level), for example an admissionFairSharing or fairSharing block.
	KueueConfig string
	// WithoutKueue starts etcd and the API server only.
	WithoutKueue bool
}

// Stack is a running control plane.
type Stack struct {
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// Kubeconfig is a file with the same credentials, for a process.
	Kubeconfig string
	Dir        string
	Client     kubernetes.Interface
	Dynamic    dynamic.Interface

	// KueueRestarts is how many times Kueue was started again because
	// its controllers did not run in time.
	KueueRestarts int
	kueueFirst    error  // why it was
	kueueMetrics  string // Kueue's metrics URL

	procs []*exec.Cmd
	bin   string
}

// Start brings the stack up and stops it when the test ends; it ends the
// test (testenv.Missing) when the binaries are not built.
func Start(t testing.TB, o Options) *Stack {
	t.Helper()
	if err := Built(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	s, err := Launch(t.TempDir(), o)
	if s != nil && s.KueueRestarts > 0 {
		log, _ := os.ReadFile(filepath.Join(s.Dir, "kueue-1.log"))
		t.Logf("Kueue was started again: %v; the first one's errors (first 10):\n%s", s.kueueFirst, errorLines(log, 10))
	}
	if s != nil {
		t.Cleanup(func() {
			s.Close()
			if t.Failed() {
				t.Log(s.Errors())
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Built says whether the stack's binaries are where $GPULEDGER_K8S_STACK
// points, and how to build them when they are not.
func Built() error {
	bin := os.Getenv(Env)
	for _, b := range []string{"etcd", "kube-apiserver", "kueue", "kueue-webhooks.yaml"} {
		if _, err := os.Stat(filepath.Join(bin, b)); bin == "" || err != nil {
			return fmt.Errorf("the Kubernetes test stack is not built (%s %q has no %s); run tools/build-k8s-stack.sh and set %s to the folder it prints", Env, bin, b, Env)
		}
	}
	return nil
}

// Launch starts the stack with its data and logs in dir; Close stops it.
// On an error the stack is stopped, except for what Close still has to
// stop when s is not nil.
func Launch(dir string, o Options) (*Stack, error) {
	if err := Built(); err != nil {
		return nil, err
	}
	s := &Stack{Dir: dir, bin: os.Getenv(Env)}
	if err := s.start(o); err != nil {
		return s, fmt.Errorf("start the Kubernetes test stack: %w (logs in %s)", err, s.Dir)
	}
	return s, nil
}

// Close stops the processes, newest first.
func (s *Stack) Close() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		stop(s.procs[i])
	}
}

// stop ends a process: SIGTERM, then SIGKILL after 10 seconds.
func stop(p *exec.Cmd) {
	if p.Process == nil || p.ProcessState != nil {
		return
	}
	p.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.Process.Kill()
		<-done
	}
}

// Errors is the first error lines of each process's log.
func (s *Stack) Errors() string {
	var b strings.Builder
	for _, name := range []string{"etcd", "kube-apiserver", "kueue"} {
		if log, err := os.ReadFile(filepath.Join(s.Dir, name+".log")); err == nil {
			fmt.Fprintf(&b, "%s log, its errors (first 10):\n%s\n", name, errorLines(log, 10))
		}
	}
	return b.String()
}

// freePort is a TCP port of 127.0.0.1 that was free a moment ago; 0 (a
// process then fails to start, and says so) when none can be had.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// errorLines picks a log's first n error lines (JSON "level":"error" or
// klog E), each cut to 600 bytes.
func errorLines(b []byte, n int) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if len(out) == n {
			break
		}
		if strings.Contains(l, `"level":"error"`) || strings.HasPrefix(l, "E") {
			if i := strings.Index(l, `"stacktrace"`); i > 0 {
				l = l[:i]
			}
			out = append(out, l[:min(len(l), 600)])
		}
	}
	return strings.Join(out, "\n")
}

func (s *Stack) run(name string, args ...string) (*exec.Cmd, error) {
	log, err := os.Create(filepath.Join(s.Dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s.procs = append(s.procs, cmd)
	return cmd, nil
}

func (s *Stack) start(o Options) error {
	ctx, cancel := context.WithTimeout(context.Background(), startWithin)
	defer cancel()
	port := func() string { return strconv.Itoa(freePort()) }
	client, peer, metrics := port(), port(), port()
	if _, err := s.run("etcd", "--name=test", "--data-dir="+filepath.Join(s.Dir, "etcd"),
		"--listen-client-urls=http://127.0.0.1:"+client, "--advertise-client-urls=http://127.0.0.1:"+client,
		"--listen-peer-urls=http://127.0.0.1:"+peer, "--initial-advertise-peer-urls=http://127.0.0.1:"+peer,
		"--initial-cluster=test=http://127.0.0.1:"+peer, "--listen-metrics-urls=http://127.0.0.1:"+metrics,
		// A test's cluster ends with the test: syncing it to disk only
		// makes it wait on the other tests' disk writes.
		"--unsafe-no-fsync"); err != nil {
		return err
	}
	if err := waitHTTP(ctx, "http://127.0.0.1:"+client+"/health", nil); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	// The API server: a token for the tests, a service-account key.
	token := randomHex(16)
	tokenFile := filepath.Join(s.Dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(token+",admin,admin-uid,system:masters\n"), 0o600); err != nil {
		return err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	saPub, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err := writePEM(filepath.Join(s.Dir, "sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)); err != nil {
		return err
	}
	if err := writePEM(filepath.Join(s.Dir, "sa.pub"), "PUBLIC KEY", saPub); err != nil {
		return err
	}
	certDir := filepath.Join(s.Dir, "apiserver-certs")
	secure := port()
	if _, err := s.run("kube-apiserver", "--etcd-servers=http://127.0.0.1:"+client, "--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1", "--secure-port="+secure, "--cert-dir="+certDir, "--token-auth-file="+tokenFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+filepath.Join(s.Dir, "sa.pub"), "--service-account-signing-key-file="+filepath.Join(s.Dir, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16", "--authorization-mode=RBAC", "--endpoint-reconciler-type=none"); err != nil {
		return err
	}
	host := "https://127.0.0.1:" + secure
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: insecureTLS()}}
	if err := waitHTTP(ctx, host+"/readyz", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }, insecure); err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	ca, err := os.ReadFile(filepath.Join(certDir, "apiserver.crt"))
	if err != nil {
		return err
	}
	s.Config = &rest.Config{Host: host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: ca}, QPS: 200, Burst: 400}
	s.Kubeconfig = filepath.Join(s.Dir, "kubeconfig")
	if err := os.WriteFile(s.Kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, certificate-authority-data: %s}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: test, context: {cluster: test, user: admin}}]
current-context: test
`, host, base64.StdEncoding.EncodeToString(ca), token)), 0o600); err != nil {
		return err
	}
	if s.Client, err = kubernetes.NewForConfig(s.Config); err != nil {
		return err
	}
	if s.Dynamic, err = dynamic.NewForConfig(s.Config); err != nil {
		return err
	}
	if o.WithoutKueue {
		return nil
	}
	return s.startKueue(ctx, o)
}

// startKueue gives Kueue its webhook certificates, CRDs (conversion through
// its webhook on 127.0.0.1) and webhook configurations, and starts it.
func (s *Stack) startKueue(ctx context.Context, o Options) error {
	const ns, svc = "kueue-system", "kueue-webhook-service"
	caCert, caKey, serverCert, serverKey, err := webhookCerts(svc + "." + ns + ".svc")
	if err != nil {
		return err
	}
	certDir := filepath.Join(s.Dir, "kueue-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return err
	}
	files := map[string][]byte{"ca.crt": caCert, "ca.key": caKey, "tls.crt": serverCert, "tls.key": serverKey}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(certDir, name), b, 0o600); err != nil {
			return err
		}
	}
	if _, err := s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if _, err := s.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kueue-webhook-server-cert"}, Data: files},
		metav1.CreateOptions{}); err != nil {
		return err
	}
	webhookPort := freePort()
	base := "https://127.0.0.1:" + strconv.Itoa(webhookPort)
	crds, err := filepath.Glob(filepath.Join(s.bin, "kueue-crds", "*.yaml"))
	if err != nil || len(crds) == 0 {
		return fmt.Errorf("no Kueue CRDs in %s/kueue-crds", s.bin)
	}
	for _, f := range crds {
		objs, err := readObjects(f)
		if err != nil {
			return err
		}
		for _, u := range objs {
			// Kueue's kustomization converts these between v1beta1 and
			// v1beta2 through its webhook; the bases lack it.
			switch u.GetName() {
			case "localqueues.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io", "cohorts.kueue.x-k8s.io", "workloads.kueue.x-k8s.io",
				"multikueueclusters.kueue.x-k8s.io":
				unstructured.SetNestedField(u.Object, map[string]any{"strategy": "Webhook", "webhook": map[string]any{
					"conversionReviewVersions": []any{"v1"}, "clientConfig": map[string]any{
						"url": base + "/convert", "caBundle": base64.StdEncoding.EncodeToString(caCert)}}}, "spec", "conversion")
			}
			if err := s.create(ctx, u); err != nil {
				return err
			}
		}
	}
	configs, err := readObjects(filepath.Join(s.bin, "kueue-webhooks.yaml"))
	if err != nil {
		return err
	}
	for _, u := range configs {
		// The kustomization prefixes the names; Kueue's rotator looks
		// for the prefixed ones.
		if !strings.HasPrefix(u.GetName(), "kueue-") {
			u.SetName("kueue-" + u.GetName())
		}
		hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
		for i, h := range hooks {
			m := h.(map[string]any)
			cc, _ := m["clientConfig"].(map[string]any)
			path := "/"
			if svcRef, ok := cc["service"].(map[string]any); ok {
				if p, ok := svcRef["path"].(string); ok {
					path = p
				}
			}
			m["clientConfig"] = map[string]any{"url": base + path, "caBundle": base64.StdEncoding.EncodeToString(caCert)}
			hooks[i] = m
		}
		unstructured.SetNestedSlice(u.Object, hooks, "webhooks")
		if err := s.create(ctx, u); err != nil {
			return err
		}
	}
	health, metricsPort := freePort(), freePort()
	cfg := fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: 127.0.0.1:%d
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: true
  webhookServiceName: %s
  webhookSecretName: kueue-webhook-server-cert
integrations:
  frameworks: [batch/job]
%s`, ns, health, metricsPort, webhookPort, certDir, svc, o.KueueConfig)
	s.kueueMetrics = fmt.Sprintf("https://127.0.0.1:%d/metrics", metricsPort)
	cfgFile := filepath.Join(s.Dir, "kueue.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		return err
	}
	// A Kueue whose informers do not sync (seen once in CI beside the
	// other packages: none of them had after a minute) is stopped and
	// started once more; its log is kept as kueue-1.log.
	for attempt := 1; attempt <= 2; attempt++ {
		if attempt > 1 {
			s.KueueRestarts, s.kueueFirst = s.KueueRestarts+1, err
			stop(s.procs[len(s.procs)-1])
			s.procs = s.procs[:len(s.procs)-1]
			if rerr := os.Rename(filepath.Join(s.Dir, "kueue.log"), filepath.Join(s.Dir, "kueue-1.log")); rerr != nil {
				return rerr
			}
		}
		if _, err := s.run("kueue", "--config="+cfgFile, "--kubeconfig="+s.Kubeconfig, "--feature-gates=VisibilityOnDemand=false"); err != nil {
			return err
		}
		actx, cancel := context.WithTimeout(ctx, kueueWithin)
		err = s.kueueReady(actx, health, fmt.Sprintf("kubetest-probe-%d", attempt))
		cancel()
		if err == nil {
			if attempt > 1 { // the first try's probe, which its Kueue may have left
				if derr := s.Dynamic.Resource(flavorsGVR).Delete(ctx, "kubetest-probe-1", metav1.DeleteOptions{}); derr != nil && !apierrors.IsNotFound(derr) {
					return derr
				}
			}
			return nil
		}
	}
	return err
}

// kueueReady waits until the Kueue just started serves its webhooks and
// runs its controllers, with a ResourceFlavor of its own (one a Kueue
// before it may have put its finalizer on is no proof), deleted after.
func (s *Stack) kueueReady(ctx context.Context, health int, probe string) error {
	if err := waitHTTP(ctx, "http://127.0.0.1:"+strconv.Itoa(health)+"/healthz", nil); err != nil {
		return fmt.Errorf("kueue: %w", err)
	}
	// The webhooks answer once Kueue serves them: a ResourceFlavor goes
	// through the validating webhook. Its controllers run only once its
	// informers have synced, which takes longer on a loaded machine: the
	// flavor controller's finalizer on it says they run, so that a test's
	// own deadlines start from a working Kueue. (A probe ClusterQueue,
	// created and deleted, left Admission Fair Sharing's usage at zero.)
	rf := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
		"metadata": map[string]any{"name": probe}}}
	flavors := s.Dynamic.Resource(flavorsGVR)
	created := false
	for {
		var err error
		if !created {
			_, err = flavors.Create(ctx, rf, metav1.CreateOptions{})
			created = err == nil
		}
		if created {
			var got *unstructured.Unstructured
			if got, err = flavors.Get(ctx, probe, metav1.GetOptions{}); err == nil {
				if len(got.GetFinalizers()) > 0 {
					return flavors.Delete(ctx, probe, metav1.DeleteOptions{})
				}
				err = errors.New("its controllers have not put their finalizer on a ResourceFlavor yet")
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kueue: %w (last: %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func insecureTLS() *tls.Config {
	// Only to poll /readyz before the server's self-signed certificate,
	// which then serves as the CA, exists.
	return &tls.Config{InsecureSkipVerify: true}
}

func readObjects(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	objs, err := decodeObjects(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// decodeObjects reads the objects of a multi-document YAML, skipping
// empty documents.
func decodeObjects(r io.Reader) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(r, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

func waitHTTP(ctx context.Context, url string, setup func(*http.Request), clients ...*http.Client) error {
	c := http.DefaultClient
	if len(clients) > 0 {
		c = clients[0]
	}
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if setup != nil {
			setup(req)
		}
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: %s", url, resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return fmt.Sprintf("%x", b)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// webhookCerts makes a CA (PKCS#1 key, as Kueue's rotator reads it) and a
// server certificate for dnsName and 127.0.0.1, PEM-encoded, valid for ten
// years, the CA named kueue-ca: Kueue's rotator replaces a CA not valid for
// that name and certificates that expire within 90
// days (and its own are not valid for 127.0.0.1).
func webhookCerts(dnsName string) (caCert, caKey, cert, key []byte, err error) {
	caPriv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kueue-ca", Organization: []string{"kueue"}}, DNSNames: []string{"kueue-ca"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(10 * 365 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caPriv.PublicKey, caPriv)
	if err != nil {
		return
	}
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(10 * 365 * 24 * time.Hour), DNSNames: []string{dnsName}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	ca, _ := x509.ParseCertificate(caDER)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &priv.PublicKey, caPriv)
	if err != nil {
		return
	}
	enc := func(typ string, b []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}) }
	return enc("CERTIFICATE", caDER), enc("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(caPriv)),
		enc("CERTIFICATE", der), enc("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(priv)), nil
}
