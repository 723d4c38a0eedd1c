package api

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestOpenAPIRoutes: every route the server serves is in the OpenAPI
// document, and the document has no route the server does not serve.
func TestOpenAPIRoutes(t *testing.T) {
	srv, _ := authServer(t)
	served := map[string]bool{}
	for _, r := range srv.e.Routes() {
		served[r.Method+" "+r.Path] = true
	}
	documented := map[string]bool{}
	for _, r := range apiRoutes {
		k := r.Method + " " + r.Path
		if documented[k] {
			t.Errorf("%s is twice in apiRoutes", k)
		}
		documented[k] = true
		if !served[k] {
			t.Errorf("%s is in apiRoutes (api/openapi.go) but the server does not serve it", k)
		}
	}
	for k := range served {
		if !documented[k] {
			t.Errorf("the server serves %s, which is not in apiRoutes (api/openapi.go): document it", k)
		}
	}
}

// examplePath fills a route's path parameters.
func examplePath(p string) string {
	p = strings.ReplaceAll(p, ":team", "ml")
	p = strings.ReplaceAll(p, ":month", "2026-10")
	return strings.ReplaceAll(p, "*", "heap")
}

// TestOpenAPIParams: each route's documented query parameters are the
// ones its handler takes. A handler refuses an unknown parameter naming
// those it takes; a route that names none must document none.
func TestOpenAPIParams(t *testing.T) {
	srv, _ := authServer(t)
	for _, r := range apiRoutes {
		code, body := call(t, srv, r.Method, examplePath(r.Path)+"?zz_unknown=1", "root")
		var documented []string
		for _, q := range r.Query {
			documented = append(documented, q.Name)
		}
		_, takes, ok := strings.Cut(body, "this route takes ")
		if code != http.StatusBadRequest || !ok {
			if len(documented) > 0 {
				t.Errorf("%s %s: documents %v, but an unknown parameter was not refused (%d %.200s)", r.Method, r.Path, documented, code, body)
			}
			continue
		}
		takes, _, _ = strings.Cut(takes, `"`)
		var handler []string
		if takes = strings.TrimSpace(takes); takes != "" {
			handler = strings.Split(takes, ", ")
		}
		slices.Sort(handler)
		slices.Sort(documented)
		if !slices.Equal(handler, documented) {
			t.Errorf("%s %s: the handler takes %v, the document says %v", r.Method, r.Path, handler, documented)
		}
	}
}

var updateOpenAPI = flag.Bool("update", false, "rewrite docs/openapi.json")

// TestOpenAPIDocs: docs/openapi.json is the document the server serves
// (go test ./api -run TestOpenAPIDocs -update rewrites it).
func TestOpenAPIDocs(t *testing.T) {
	srv, _ := authServer(t)
	_, body := call(t, srv, "GET", "/api/v1/openapi.json", "")
	const path = "../docs/openapi.json"
	if *updateOpenAPI {
		if err := os.WriteFile(path, []byte(body+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./api -run TestOpenAPIDocs -update writes it)", err)
	}
	if string(want) != body+"\n" {
		t.Errorf("%s is not the document the server serves; go test ./api -run TestOpenAPIDocs -update rewrites it", path)
	}
}

// TestOpenAPIResponses: the document is valid OpenAPI 3 (kin-openapi's
// validator), served without a token, and each JSON route's answer to
// its documented example validates against its documented schema.
func TestOpenAPIResponses(t *testing.T) {
	srv, _ := authServer(t)
	code, body := call(t, srv, "GET", "/api/v1/openapi.json", "")
	if code != http.StatusOK {
		t.Fatalf("GET /api/v1/openapi.json: %d %s", code, body)
	}
	ctx := context.Background()
	doc, err := openapi3.NewLoader().LoadFromData([]byte(body))
	if err != nil {
		t.Fatalf("the document does not load: %v", err)
	}
	if err := doc.Validate(ctx); err != nil {
		t.Fatalf("the document is not valid OpenAPI 3: %v", err)
	}
	for _, r := range apiRoutes {
		if r.Response == nil || r.Method != http.MethodGet {
			continue
		}
		required := slices.ContainsFunc(r.Query, func(q apiParam) bool { return q.Required })
		if required && r.Example == "" {
			t.Errorf("%s %s takes required parameters but has no Example to test its answer with", r.Method, r.Path)
			continue
		}
		url := examplePath(r.Path)
		if r.Example != "" {
			url += "?" + r.Example
		}
		req := httptest.NewRequest(r.Method, url, nil)
		req.Header.Set("Authorization", "Bearer secret-root")
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Errorf("%s %s: %d %s", r.Method, url, rec.Code, rec.Body.String())
			continue
		}
		op := doc.Paths.Value(openAPIPath(r.Path)).GetOperation(r.Method)
		schema := op.Responses.Status(http.StatusOK).Value.Content.Get("application/json").Schema.Value
		dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Errorf("%s: not JSON: %v", url, err)
			continue
		}
		if err := schema.VisitJSON(v, openapi3.MultiErrors()); err != nil {
			t.Errorf("%s: the answer does not match its documented schema: %v\n%.600s", url, err, rec.Body.String())
		}
	}
	// Close answers a ClosePoint (POST, not an example above).
	code, body = call(t, srv, "POST", "/api/v1/admin/close?month=2026-10&note=INV-10", "root")
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil || code != http.StatusOK {
		t.Fatalf("close: %d %s", code, body)
	}
	schema := doc.Paths.Value("/api/v1/admin/close").Post.Responses.Status(http.StatusOK).Value.Content.Get("application/json").Schema.Value
	if err := schema.VisitJSON(v); err != nil {
		t.Errorf("close's answer does not match its schema: %v\n%s", err, body)
	}
}
