package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certPaths names one PEM certificate and its PEM (PKCS#8) key on disk.
type certPaths struct{ cert, key string }

// certAuthority is the throwaway ECDSA P-256 CA a cluster's leaves chain to.
type certAuthority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // PEM of cert
}

// newCA writes ca.pem into dir. The CA lives for one test: a day of validity
// is plenty and backdating by an hour absorbs clock skew.
func newCA(dir string) (*certAuthority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "etcdscope etcdtest CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	file := filepath.Join(dir, "ca.pem")
	if err := writePEM(file, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return &certAuthority{cert: cert, key: key, file: file}, nil
}

// leaf writes <name>.pem and <name>-key.pem into dir: a certificate for
// both TLS server and client use (etcd presents the same pair when it dials
// a peer as when it accepts one) with IP SANs for ips.
func (ca *certAuthority) leaf(dir, name string, serial int64, ips []string) (certPaths, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return certPaths{}, fmt.Errorf("generating key for %s: %w", name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
	}
	for _, s := range ips {
		ip := net.ParseIP(s)
		if ip == nil {
			return certPaths{}, fmt.Errorf("certificate for %s: %q is not an IP address", name, s)
		}
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return certPaths{}, fmt.Errorf("creating certificate for %s: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return certPaths{}, fmt.Errorf("encoding key for %s: %w", name, err)
	}
	p := certPaths{cert: filepath.Join(dir, name+".pem"), key: filepath.Join(dir, name+"-key.pem")}
	if err := writePEM(p.cert, "CERTIFICATE", der); err != nil {
		return certPaths{}, err
	}
	if err := writePEM(p.key, "PRIVATE KEY", keyDER); err != nil {
		return certPaths{}, err
	}
	return p, nil
}

func writePEM(file, typ string, der []byte) error {
	data := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if err := os.WriteFile(file, data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	return nil
}

// ServerCert writes into dir a throwaway CA (ca.pem) and a certificate
// signed by it for 127.0.0.1 and localhost (server.pem, server-key.pem),
// for tests of other TLS servers (an OTLP collector): the paths of the
// three files.
func ServerCert(dir string) (ca, cert, key string, err error) {
	a, err := newCA(dir)
	if err != nil {
		return "", "", "", err
	}
	p, err := a.leaf(dir, "server", 2, []string{"127.0.0.1"})
	if err != nil {
		return "", "", "", err
	}
	return a.file, p.cert, p.key, nil
}
