package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/exporter"
	"github.com/etcdscope/etcdscope/exporter/otlp"
	"github.com/etcdscope/etcdscope/internal/testenv"
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

// TestOTLPHeaderFile: --otlp-header-file and the SDK's
// OTEL_EXPORTER_OTLP_(TRACES_)HEADERS give the headers --otlp-header
// gives, into the same Config.Headers (whose values the sink redacts);
// a file anyone else can write or another user's, a planted link, an
// oversize file and a bad line are refused with a usage error (exit 2)
// of one line that never shows a value; the variables are taken out of the environment, so the
// SDK does not read them again; a variable beside the flags is refused.
func TestOTLPHeaderFile(t *testing.T) {
	const secret = "s3cret-0123456789"
	for _, n := range otlp.EnvHeaders {
		t.Setenv(n, "")
		os.Unsetenv(n)
	}
	dir := t.TempDir()
	file := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	parse := func(args ...string) (*otlp.Config, error) {
		var f serveFlags
		if err := f.flagSet().Parse(append([]string{"--etcd-endpoints", "http://127.0.0.1:2379", "--otlp-endpoint", "127.0.0.1:4317"}, args...)); err != nil {
			t.Fatal(err)
		}
		var cfg exporter.Config
		err := f.validateOTLP(true, &cfg)
		return cfg.OTLP, err
	}
	good := file("headers", "# the collector's token\r\nAuthorization=Bearer "+secret+"\r\n\n  x-scope-orgid=tenant-1  \n", 0o600)
	cfg, err := parse("--otlp-header-file", good)
	if err != nil || cfg.Headers["authorization"] != "Bearer "+secret || cfg.Headers["x-scope-orgid"] != "tenant-1" || len(cfg.Headers) != 2 {
		t.Errorf("--otlp-header-file: %v, %v: want authorization and x-scope-orgid", cfg, err)
	}
	cfg, err = parse("--otlp-header-file", good, "--otlp-header", "x-other=1")
	if err != nil || len(cfg.Headers) != 3 {
		t.Errorf("--otlp-header-file with --otlp-header: %v, %v: want the three headers", cfg, err)
	}

	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20"+secret+",x-scope-orgid=a")
	cfg, err = parse()
	if err != nil || cfg.Headers["authorization"] != "Bearer "+secret || cfg.Headers["x-scope-orgid"] != "a" || len(cfg.Headers) != 2 {
		t.Errorf("OTEL_EXPORTER_OTLP_HEADERS: %v, %v: want its two headers, decoded", cfg, err)
	}
	for _, n := range otlp.EnvHeaders {
		if _, set := os.LookupEnv(n); set {
			t.Errorf("%s still set after validation: the SDK would read it again", n)
		}
	}
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20"+secret)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "authorization=Basic%20"+secret)
	if cfg, err = parse(); err != nil || cfg.Headers["authorization"] != "Basic "+secret {
		t.Errorf("both variables: %v, %v: want TRACES_HEADERS's, as the SDK takes it", cfg, err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20"+secret)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", " ")
	if cfg, err = parse(); err != nil || cfg.Headers["authorization"] != "Bearer "+secret {
		t.Errorf("TRACES_HEADERS of spaces: %v, %v: want HEADERS's, as the SDK takes it (spaces are unset)", cfg, err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "")
	if cfg, err = parse("--otlp-header", "a=1"); err != nil || len(cfg.Headers) != 1 {
		t.Errorf("an empty variable beside --otlp-header: %v, %v: want the flag's header (empty is unset)", cfg, err)
	}

	// /dev/zero, a FIFO, a directory and a 1 GB file: TestPathFlagClasses
	// gives them to the real serve (every path flag's hostile classes).
	type bad struct {
		args []string
		env  string
		fix  string
	}
	cases := []bad{
		{args: []string{"--otlp-header-file", file("world", "authorization=Bearer "+secret+"\n", 0o666)}, fix: "(mode 0666): chmod go-w"},
		{args: []string{"--otlp-header-file", file("big", "authorization=Bearer "+secret+"\n"+strings.Repeat("#\n", 40<<10), 0o600)}, fix: "larger than 64 KiB"},
		{args: []string{"--otlp-header-file", file("empty", "# nothing\n\n", 0o600)}, fix: "holds no key=value line"},
		{args: []string{"--otlp-header-file", file("noeq", "# token\nBearer "+secret+"\n", 0o600)}, fix: "line 2: give key=value"},
		{args: []string{"--otlp-header-file", file("ctl", "authorization=Bearer "+secret+"\x1b[2J\n", 0o600)}, fix: "line 1: \"authorization\": its value has byte"},
		{args: []string{"--otlp-header-file", file("dup", "authorization=Bearer "+secret+"\n", 0o600), "--otlp-header", "Authorization=Bearer " + secret}, fix: "\"authorization\" given twice"},
		{args: []string{"--otlp-header-file", file("many", strings.Repeat("a=Bearer "+secret+"\n", otlp.MaxHeaders+1), 0o600)}, fix: "give at most 16"},
		{args: []string{"--otlp-header", "a=" + secret}, env: "authorization=Bearer%20" + secret, fix: "is set and --otlp-header(-file) given"},
		{env: "authorization=Bearer%2" + secret, fix: "entry 1 (\"authorization\"): its value is not percent-encoded"},
		{env: "authorization=Bearer " + secret + ",Bearer " + secret, fix: "entry 2: give key=value"},
		{env: "grpc-timeout=" + secret, fix: "grpc-* keys are gRPC's own"},
	}
	if os.Geteuid() == 0 {
		nobody := file("nobody", "authorization=Bearer "+secret+"\n", 0o600)
		if err := os.Chown(nobody, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		planted := testenv.PlantLink(t, dir, good)
		cases = append(cases, bad{args: []string{"--otlp-header-file", nobody}, fix: "owned by uid 65534, not root"},
			bad{args: []string{"--otlp-header-file", planted}, fix: "symbolic link owned by uid 65534"})
	}
	for _, c := range cases {
		os.Unsetenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
		os.Unsetenv("OTEL_EXPORTER_OTLP_HEADERS")
		if c.env != "" {
			os.Setenv("OTEL_EXPORTER_OTLP_HEADERS", c.env)
		}
		_, err := parse(c.args...)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.fix) || strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v %q: error %q: want a usage error of one line with %q, without the value", c.args, c.env, err, c.fix)
		}
	}
}
