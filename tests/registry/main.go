// The OCI registry the tests start: go-containerregistry's in-memory registry (the distribution
// API with the referrers API of OCI 1.1), on 127.0.0.1, in front of it the token authentication
// that registries such as Docker Hub, GHCR and Harbor use, when -user is given.
//
// go-containerregistry answers a finished upload and a stored manifest with 201 and no Location,
// which the distribution spec requires (and oci-client, under wkg, insists on): the front adds it.
//
// It prints "listening on ADDR" on stdout once it accepts connections, and logs one line per
// request ("METHOD PATH auth=<scheme>") to -log, so that a test can see what was asked and with
// which kind of credential (never the credential itself).
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	user := flag.String("user", "", "when set, every /v2/ request needs a bearer token from /token, which needs this user")
	password := flag.String("password", "", "the user's password")
	referrers := flag.Bool("referrers", true, "serve the OCI 1.1 referrers API (false: clients fall back to the tag schema)")
	logPath := flag.String("log", "", "append one line per request to this file")
	flag.Parse()

	var requests io.Writer = io.Discard
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			log.Fatal(err)
		}
		requests = f
	}
	var logMu sync.Mutex
	quiet := log.New(io.Discard, "", 0)
	reg := registry.New(registry.Logger(quiet), registry.WithReferrersSupport(*referrers))

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	addr := ln.Addr().String()
	tokens := sync.Map{}

	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme := "none"
		if a := r.Header.Get("Authorization"); a != "" {
			scheme = strings.ToLower(strings.SplitN(a, " ", 2)[0])
		}
		logMu.Lock()
		fmt.Fprintf(requests, "%s %s auth=%s\n", r.Method, r.URL.RequestURI(), scheme)
		logMu.Unlock()
		if *user == "" {
			serve(reg, w, r)
			return
		}
		if r.URL.Path == "/token" {
			u, p, ok := r.BasicAuth()
			if !ok || u != *user || p != *password {
				w.Header().Set("WWW-Authenticate", `Basic realm="test-registry"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"wrong user or password"}]}`, http.StatusUnauthorized)
				return
			}
			b := make([]byte, 16)
			_, _ = rand.Read(b)
			token := hex.EncodeToString(b)
			tokens.Store(token, true)
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"token": token, "access_token": token, "expires_in": 300})
			return
		}
		if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
			if _, ok := tokens.Load(strings.TrimPrefix(a, "Bearer ")); ok {
				serve(reg, w, r)
				return
			}
		}
		scope := ""
		if parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/v2/"), "/", -1); len(parts) > 2 {
			for i, p := range parts {
				if p == "manifests" || p == "blobs" || p == "referrers" || p == "tags" {
					scope = fmt.Sprintf(`,scope="repository:%s:pull,push"`, strings.Join(parts[:i], "/"))
					break
				}
			}
		}
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="http://%s/token",service="test-registry"%s`, addr, scope))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
	})

	fmt.Printf("listening on %s\n", addr)
	os.Stdout.Sync()
	log.Fatal(http.Serve(ln, handler))
}

// serve passes r to the registry, adding the Location of what a 201 created.
func serve(reg http.Handler, w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/v2/")
	digest := r.URL.Query().Get("digest")
	switch {
	case (r.Method == http.MethodPost || r.Method == http.MethodPut) && strings.Contains(path, "/blobs/uploads/") && digest != "":
		name := path[:strings.Index(path, "/blobs/uploads/")]
		w = &located{ResponseWriter: w, location: fmt.Sprintf("/v2/%s/blobs/%s", name, digest)}
	case r.Method == http.MethodPut && strings.Contains(path, "/manifests/"):
		w = &located{ResponseWriter: w, location: r.URL.Path}
	}
	reg.ServeHTTP(w, r)
}

type located struct {
	http.ResponseWriter
	location string
}

func (l *located) WriteHeader(status int) {
	if status == http.StatusCreated && l.Header().Get("Location") == "" {
		l.Header().Set("Location", l.location)
	}
	l.ResponseWriter.WriteHeader(status)
}
