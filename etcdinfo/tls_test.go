package etcdinfo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadTLS: no files is no TLS; a file that cannot be used is an error
// naming its flag and the fix.
func TestLoadTLS(t *testing.T) {
	if cfg, err := LoadTLS(TLSFiles{CAFlag: "--cacert", CertFlag: "--cert", KeyFlag: "--key"}); cfg != nil || err != nil {
		t.Fatalf("no files: %v, %v", cfg, err)
	}
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	for _, c := range []struct {
		f    TLSFiles
		want string
	}{
		{TLSFiles{CAFlag: "--cacert", CA: missing}, "--cacert: "},
		{TLSFiles{CAFlag: "--cacert", CA: junk}, "--cacert " + junk + " holds no PEM certificate"},
		{TLSFiles{CertFlag: "--otlp-cert", Cert: junk, KeyFlag: "--otlp-key", Key: junk}, "--otlp-cert/--otlp-key: "},
	} {
		_, err := LoadTLS(c.f)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q...", c.f, err, c.want)
		}
	}
	if _, err := LoadTLS(TLSFiles{CAFlag: "--cacert", CA: missing}); err == nil || !strings.HasSuffix(err.Error(), ": give a PEM file") {
		t.Errorf("missing file: %v", err)
	}
}
