// Command peertraffic makes TCP traffic on a loopback port for
// scripts/record-captures.sh: it listens on 127.0.0.1:PORT, keeps one
// connection alive sending a small message every 100 ms (a Raft stream),
// and dials a short connection per request (etcd's per-probe prober).
package main

import (
	"flag"
	"io"
	"log"
	"net"
	"strconv"
	"time"
)

func main() {
	port := flag.Int("port", 23917, "loopback port")
	conns := flag.Int("conns", 20, "short connections to dial")
	d := flag.Duration("for", 2*time.Second, "how long")
	flag.Parse()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(*port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 512)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
				}
			}()
		}
	}()
	stream, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	end := time.Now().Add(*d)
	every := *d / time.Duration(*conns)
	buf := make([]byte, 64)
	for time.Now().Before(end) {
		stream.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := stream.Write(buf); err != nil {
			log.Fatal(err)
		}
		if _, err := io.ReadFull(stream, buf); err != nil {
			log.Fatal(err)
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			log.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write(buf)
		io.ReadFull(c, buf)
		c.Close()
		time.Sleep(every)
	}
	stream.Close()
}
