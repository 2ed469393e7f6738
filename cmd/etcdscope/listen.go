package main

import (
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/etcdscope/etcdscope/exporter"
)

// normalizeListen turns a --listen value into host:port for net.Listen.
// It takes host:port, [IPv6]:port, [IPv4]:port (what the DaemonSet's
// `[$(NODE_IP)]:10380` becomes on an IPv4 node: Kubernetes expands
// $(VAR) anywhere in an argument, brackets included), or a bare IP
// address of either family, which gets exporter.DefaultPort. A bare IPv6
// address with a port, "fd00::1:10380", is ambiguous and is read as an
// address; the error for anything else names the bracketed form.
func normalizeListen(s string) (host, port string, err error) {
	host, port, err = net.SplitHostPort(s)
	if err == nil {
		return host, port, nil
	}
	if a, perr := netip.ParseAddr(strings.Trim(s, "[]")); perr == nil && a.Zone() == "" {
		return a.String(), strconv.Itoa(exporter.DefaultPort), nil
	}
	return "", "", usagef("--listen %q: %v; give host:port, [IPv6]:port or a bare IP, e.g. 127.0.0.1:%d or [::1]:%d",
		s, err, exporter.DefaultPort, exporter.DefaultPort)
}
