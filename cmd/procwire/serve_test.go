//go:build linux

package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
)

// startServe runs "procwire serve args..." until the test ends and returns
// the URL it logs.
func startServe(t *testing.T, args ...string) string {
	sctx, stop := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(sctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), &stdio{out: io.Discard, err: pw})
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	var url string
	for url == "" && lines.Scan() {
		if _, after, ok := strings.Cut(lines.Text(), "url="); ok {
			url, _, _ = strings.Cut(after, " ")
		}
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		io.Copy(io.Discard, pr)
	}()
	t.Cleanup(func() {
		stop()
		require.Equal(t, 0, <-done)
		<-drained
	})
	require.NotEmpty(t, url, "serve logged no URL")
	return url
}

// selfSignedName is the DNS name selfSigned's certificate is for, besides
// 127.0.0.1.
const selfSignedName = "procwire.test"

// selfSigned writes a certificate for 127.0.0.1 and selfSignedName and its
// key into dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{selfSignedName},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600))
	return certFile, keyFile, pool
}

func TestServeTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	t.Setenv(tokenEnv, "tls-token-0123456789")
	url := startServe(t, "--tls-cert", certFile, "--tls-key", keyFile)
	require.True(t, strings.HasPrefix(url, "wss://"), url)

	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	c := testCtx(t)
	p, err := client.Open(c, url, "tls", frames.ProcessRequest{
		Executable: "echo", Arguments: []string{"over tls"}, WorkingDirectory: "/",
		Environment: map[string]string{},
	}, &client.Options{Token: "tls-token-0123456789", HTTPClient: &http.Client{Transport: tr}})
	require.NoError(t, err)
	out, err := io.ReadAll(p.Stdout())
	require.NoError(t, err)
	require.Equal(t, "over tls\n", string(out))
	require.NoError(t, p.Destroy(c))
}

// serve chooses s2 for a client that asks for it, and none with
// --no-compression.
func TestServeNoCompression(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{{nil, frames.EncS2}, {[]string{"--no-compression"}, ""}} {
		url := startServe(t, tc.args...)
		c := testCtx(t)
		p, err := client.Open(c, url, "compress", frames.ProcessRequest{
			Executable: "echo", Arguments: []string{"compressed?"}, WorkingDirectory: "/",
			Environment: map[string]string{},
		}, &client.Options{Compress: true})
		require.NoError(t, err)
		h := p.Handle()
		require.Equal(t, tc.want, h.OutputEnc, tc.args)
		require.Equal(t, tc.want, h.StdinEnc, tc.args)
		out, err := io.ReadAll(p.Stdout())
		require.NoError(t, err)
		require.Equal(t, "compressed?\n", string(out))
		require.NoError(t, p.Destroy(c))
	}
}

// serve warns about a token in clear text unless it listens on loopback
// only.
func TestServeWarnsOnlyBeyondLoopback(t *testing.T) {
	for _, tc := range []struct {
		ip   net.IP
		want bool
	}{{net.IPv4(127, 0, 0, 1), false}, {net.IPv6loopback, false}, {net.IPv4zero, true}, {net.IPv6unspecified, true}, {net.IPv4(192, 0, 2, 1), true}} {
		require.Equal(t, tc.want, clearTextToken("a-token-of-16-bytes", false, &net.TCPAddr{IP: tc.ip}), tc.ip)
		require.False(t, clearTextToken("a-token-of-16-bytes", true, &net.TCPAddr{IP: tc.ip}), "with TLS")
		require.False(t, clearTextToken("", false, &net.TCPAddr{IP: tc.ip}), "without a token")
	}
}

func TestLookupRunAs(t *testing.T) {
	u, err := lookupRunAs("root")
	require.NoError(t, err)
	require.Equal(t, uint32(0), u.UID)
	require.Equal(t, uint32(0), u.GID)
	byID, err := lookupRunAs("0")
	require.NoError(t, err)
	require.Equal(t, u, byID)
	_, err = lookupRunAs("no-such-user-procwire")
	require.Error(t, err)
}
