package otlp

import (
	"fmt"
	"net/url"
	"os"
	"strings"
)

// ParseHeaderFile splits a headers file (serve --otlp-header-file) into
// key=value arguments for ParseHeader, one a line, as --otlp-header takes
// them (the value as written, not percent-decoded); each line's trailing
// CR (a file written on Windows) and trailing spaces and tabs are dropped,
// and blank lines and lines starting with '#' are skipped. lines holds each
// header's line number.
func ParseHeaderFile(b []byte) (headers []string, lines []int) {
	for i, l := range strings.Split(string(b), "\n") {
		l = strings.TrimRight(l, "\r \t")
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		headers = append(headers, l)
		lines = append(lines, i+1)
	}
	return headers, lines
}

// EnvHeaders are the OpenTelemetry SDK's variables of headers, in the
// order the SDK reads them: a later one set takes the place of an earlier.
var EnvHeaders = []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"}

// TakeEnvHeaders returns the variable of EnvHeaders the SDK would use and
// its value ("" when none is set to more than spaces, which the SDK takes
// as unset), and unsets them all: the exporter's SDK
// reads them itself at New, unchecked, without redaction, and logs a value
// it cannot decode; taken here, they go through ParseEnvHeaders and
// Config.Headers like the flags' headers.
func TakeEnvHeaders() (name, value string) {
	for _, n := range EnvHeaders {
		if v := os.Getenv(n); strings.TrimSpace(v) != "" {
			name, value = n, v
		}
		os.Unsetenv(n)
	}
	return name, value
}

// ParseEnvHeaders splits a value of EnvHeaders, the SDK's form
// (comma-separated key=value, each value percent-encoded, e.g.
// authorization=Bearer%20TOKEN), into key=value arguments for
// ParseHeader, decoded as the SDK decodes them (url.PathUnescape, spaces
// trimmed); an empty value is no header, as for the SDK. Its errors name an entry by its position, never its text.
func ParseEnvHeaders(v string) ([]string, error) {
	var out []string
	for i, e := range strings.Split(v, ",") {
		if strings.TrimSpace(e) == "" {
			continue
		}
		k, val, ok := strings.Cut(e, "=")
		if !ok {
			return nil, fmt.Errorf("entry %d: give key=value, entries separated by commas (the entry is not shown: it may be a secret)", i+1)
		}
		d, err := url.PathUnescape(val)
		if err != nil {
			return nil, fmt.Errorf("entry %d (%.40q): its value is not percent-encoded (a %% not followed by two hex digits); the value is not shown", i+1, strings.TrimSpace(k))
		}
		out = append(out, strings.TrimSpace(k)+"="+strings.TrimSpace(d))
	}
	return out, nil
}
