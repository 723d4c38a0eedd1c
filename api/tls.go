package api

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// certReloader serves a certificate from files and loads them again when
// their contents change (a renewed certificate mounted from a Secret),
// checked at most every interval. A pair that does not load (a key that
// does not match the certificate, a file half written) keeps the previous
// certificate in service, is logged once and counted.
type certReloader struct {
	certFile, keyFile string
	interval          time.Duration
	log               *slog.Logger
	// reloaded is told of each new pair tried: nil when it serves, else
	// why not.
	reloaded func(err error)

	mu      sync.Mutex
	watch   contentWatch
	cert    *tls.Certificate
	checked time.Time
}

func newCertReloader(certFile, keyFile string, log *slog.Logger, reloaded func(error)) (*certReloader, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if reloaded == nil {
		reloaded = func(error) {}
	}
	r := &certReloader{certFile: certFile, keyFile: keyFile, interval: 10 * time.Second, log: log, reloaded: reloaded,
		watch: contentWatch{paths: []string{certFile, keyFile}}}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// load reads the pair and, when its contents changed, serves it if it
// loads.
func (r *certReloader) load() error {
	files, changed, err := r.watch.read()
	if err != nil {
		return fmt.Errorf("TLS certificate: %w", err)
	}
	if !changed {
		return nil
	}
	cert, err := tls.X509KeyPair(files[0], files[1])
	if err != nil {
		return fmt.Errorf("load TLS certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert = &cert
	return nil
}

// getCertificate is tls.Config.GetCertificate: the current certificate,
// reloaded if its files changed. A failed reload keeps the old one.
func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= r.interval {
		r.checked = now
		r.check()
	}
	return r.cert, nil
}

// check reloads the pair, logging and counting the outcome of a change.
func (r *certReloader) check() {
	before := r.cert
	err := r.load()
	switch {
	case err != nil:
		r.log.Error("TLS certificate not reloaded; the previous one stays in service until the files hold a matching pair",
			"cert", r.certFile, "key", r.keyFile, "err", err)
		r.reloaded(err)
	case r.cert != before:
		r.log.Info("TLS certificate reloaded", "cert", r.certFile)
		r.reloaded(nil)
	}
}
