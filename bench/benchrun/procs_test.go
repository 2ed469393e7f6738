package main

import (
	"net"
	"testing"
)

// TestFreePortsApart: the churn sections' ports come from the kernel, so
// two sessions (or two sections) running at once get two ports, each one
// fsyncgen -churn can listen on; the fixed 23891/23892 collided.
func TestFreePortsApart(t *testing.T) {
	a, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	la, err := net.Listen("tcp", "127.0.0.1:"+a) // the first session's fsyncgen
	if err != nil {
		t.Fatalf("port %s: %v", a, err)
	}
	defer la.Close()
	b, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatalf("port %s handed out twice while in use", a)
	}
	lb, err := net.Listen("tcp", "127.0.0.1:"+b)
	if err != nil {
		t.Fatalf("port %s: %v", b, err)
	}
	lb.Close()
}
