package etcdinfo

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"github.com/etcdscope/etcdscope/internal/safefile"
)

// TLSFiles are a CA bundle, a client certificate and its key, each by the
// flag that gave it and its path ("": not given): etcd's --cacert, --cert,
// --key, or serve's --otlp-ca, --otlp-cert, --otlp-key.
type TLSFiles struct {
	CAFlag, CA, CertFlag, Cert, KeyFlag, Key string
}

// LoadTLS reads f into a client TLS configuration (nil when neither a CA
// nor a certificate is given). Its error names the flag of the file that
// cannot be used, and the fix: the caller's usage error.
func LoadTLS(f TLSFiles) (*tls.Config, error) {
	if f.CA == "" && f.Cert == "" {
		return nil, nil
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	// Each read is bounded and of a regular file: --cacert /dev/zero grew
	// past 2 GB, and a FIFO blocked forever.
	read := func(flag, path string) ([]byte, error) {
		b, err := safefile.ReadInput(path, safefile.MaxPEMBytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: give a PEM file", flag, err)
		}
		return b, nil
	}
	if f.CA != "" {
		pem, err := read(f.CAFlag, f.CA)
		if err != nil {
			return nil, err
		}
		tlsCfg.RootCAs = x509.NewCertPool()
		if !tlsCfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s %s holds no PEM certificate", f.CAFlag, f.CA)
		}
	}
	if f.Cert != "" {
		certPEM, err := read(f.CertFlag, f.Cert)
		if err != nil {
			return nil, err
		}
		keyPEM, err := read(f.KeyFlag, f.Key)
		if err != nil {
			return nil, err
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", f.CertFlag, f.KeyFlag, err)
		}
		tlsCfg.Certificates = []tls.Certificate{c}
	}
	return tlsCfg, nil
}
