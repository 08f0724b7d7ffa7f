package server

import (
	"crypto/tls"
	"sync/atomic"
)

// CertReloader holds a TLS certificate and key read from files, and reads
// them again on Reload (serve calls it on SIGHUP), so that a renewed
// certificate is served without a restart. Handshakes under way keep the
// certificate they started with. Safe for concurrent use.
type CertReloader struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
}

// NewCertReloader reads certFile and keyFile (PEM), or returns the error
// that makes them unusable.
func NewCertReloader(certFile, keyFile string) (*CertReloader, error) {
	r := &CertReloader{certFile: certFile, keyFile: keyFile}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the files again. On error (tls.LoadX509KeyPair's) the
// certificate served is kept.
func (r *CertReloader) Reload() error {
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return err
	}
	r.cert.Store(&cert)
	return nil
}

// TLSConfig returns a server configuration serving the current
// certificate: TLS 1.2 at least, and only http/1.1 offered by ALPN, since
// a WebSocket upgrade needs HTTP/1.1 (RFC 6455; h2 would need RFC 8441).
func (r *CertReloader) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return r.cert.Load(), nil
		},
	}
}
