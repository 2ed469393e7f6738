package main

import (
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/exporter"
	"github.com/etcdscope/etcdscope/exporter/otlp"
)

// TestOTLPHeaderSecret: --otlp-header values reach the exporter's
// configuration as given (key lowercased), and no refusal of a header
// shows its value: a header is a secret (a bearer token).
func TestOTLPHeaderSecret(t *testing.T) {
	const secret = "s3cret-0123456789"
	parse := func(headers ...string) (*otlp.Config, error) {
		var f serveFlags
		if err := f.flagSet().Parse([]string{"--etcd-endpoints", "http://127.0.0.1:2379", "--otlp-endpoint", "127.0.0.1:4317"}); err != nil {
			t.Fatal(err)
		}
		f.otlpHeaders = headers
		var cfg exporter.Config
		err := f.validateOTLP(true, &cfg)
		return cfg.OTLP, err
	}
	cfg, err := parse("Authorization=Bearer "+secret, "x-scope-orgid=a=b")
	if err != nil || cfg.Headers["authorization"] != "Bearer "+secret || cfg.Headers["x-scope-orgid"] != "a=b" || len(cfg.Headers) != 2 {
		t.Errorf("headers %v, %v: want authorization and x-scope-orgid as given", cfg, err)
	}
	for _, bad := range [][]string{
		{"Bearer " + secret},
		{"authorization=Bearer " + secret + "\r\n"},
		{"authorization=Bearer " + secret, "authorization=Bearer " + secret},
		{"auth:x=" + secret},
		{"authorization=" + secret + strings.Repeat("0", otlp.MaxHeaderBytes)},
		append(make([]string, otlp.MaxHeaders), "a="+secret),
	} {
		_, err := parse(bad...)
		if err == nil || strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%d headers: error %q: want one line without the value", len(bad), err)
		}
	}
}
