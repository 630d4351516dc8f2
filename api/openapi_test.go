package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v3"

	"github.com/actledger/actledger/api"
	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/request"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

// document is openapi.yaml as GET /openapi.json serves it, decoded.
func document(t *testing.T) map[string]any {
	t.Helper()
	raw, err := api.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// documentedOperations lists the document's operations as ServeMux
// patterns ("GET /v1/review"), each with its operation object.
func documentedOperations(t *testing.T) map[string]map[string]any {
	t.Helper()
	ops := map[string]map[string]any{}
	for path, item := range document(t)["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				ops[strings.ToUpper(method)+" "+path] = op.(map[string]any)
			}
		}
	}
	return ops
}

// anyRole are the roles of a route the contract's table says "any" of.
var anyRole = []auth.Role{auth.RoleAgent, auth.RoleOperator, auth.RoleApprover}

func TestOpenAPIDocumentIsValidOpenAPI31(t *testing.T) {
	t.Parallel()
	raw, err := api.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi %q, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI document: %v", err)
	}
}

// The route table and the document describe the same routes: a route
// added to the mux without a description, or a description of a route
// that is not served, fails here.
func TestEveryRouteIsDocumentedAndEveryDocumentedRouteIsServed(t *testing.T) {
	t.Parallel()
	documented := documentedOperations(t)
	served := map[string]bool{}
	for _, rt := range api.Routes() {
		if rt.Undocumented != "" {
			continue
		}
		served[rt.Pattern] = true
		op, ok := documented[rt.Pattern]
		switch {
		case !ok:
			t.Errorf("route %q is served but not in api/openapi.yaml", rt.Pattern)
		case op["x-pending"] != nil:
			t.Errorf("route %q is served now: remove its x-pending from api/openapi.yaml", rt.Pattern)
		}
	}
	for pattern, op := range documented {
		if !served[pattern] && op["x-pending"] == nil {
			t.Errorf("api/openapi.yaml describes %q, which the route table does not serve", pattern)
		}
	}
}

// Each operation's x-roles are the roles its route lets in, and a route
// that takes no token is documented without security.
func TestDocumentedRolesAreTheRoutesRoles(t *testing.T) {
	t.Parallel()
	documented := documentedOperations(t)
	for _, rt := range api.Routes() {
		op, ok := documented[rt.Pattern]
		if !ok {
			continue // the test above reports it
		}
		var got []string
		if xr, ok := op["x-roles"].([]any); ok {
			for _, r := range xr {
				got = append(got, fmt.Sprint(r))
			}
		}
		var want []string
		for _, r := range rt.Roles {
			want = append(want, string(r))
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: x-roles %v, the route lets in %v", rt.Pattern, got, want)
		}
		sec, hasSec := op["security"].([]any)
		public := hasSec && len(sec) == 0
		if public != (len(rt.Roles) == 0) {
			t.Errorf("%s: documented without a bearer token %v, route takes none %v", rt.Pattern, public, len(rt.Roles) == 0)
		}
	}
}

// httpStatuses names the net/http constants errorf is called with.
var httpStatuses = map[string]int{
	"StatusBadRequest": 400, "StatusUnauthorized": 401, "StatusForbidden": 403, "StatusNotFound": 404,
	"StatusMethodNotAllowed": 405,
	"StatusRequestTimeout":   408, "StatusConflict": 409, "StatusRequestEntityTooLarge": 413,
	"StatusUnprocessableEntity": 422, "StatusInternalServerError": 500, "StatusServiceUnavailable": 503,
}

// answeredCodes lists every "status code" pair the API answers with: each
// errorf call in the package's source, the approval codes the ledger
// gives (403, mapped in errors.go) and the request body refusals (400).
func answeredCodes(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]bool{}
	for _, c := range []ledger.ApprovalCode{ledger.ApprovalExpired, ledger.ApprovalRevoked, ledger.ApprovalUsed, ledger.ApprovalMismatch} {
		codes["403 "+string(c)] = true
	}
	for _, c := range request.Codes {
		codes["400 "+c] = true
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			if fn, ok := call.Fun.(*ast.Ident); !ok || fn.Name != "errorf" {
				return true
			}
			if conv, ok := call.Args[1].(*ast.CallExpr); ok && fmt.Sprint(conv.Fun) == "string" {
				return true // string(approvalErr.Code): the ledger's approval codes, above
			}
			if sel, ok := call.Args[1].(*ast.SelectorExpr); ok && fmt.Sprint(sel.X) == "refusal" {
				return true // refusal.Code: request.Codes, above
			}
			sel, ok := call.Args[0].(*ast.SelectorExpr)
			lit, ok2 := call.Args[1].(*ast.BasicLit)
			if !ok || !ok2 || lit.Kind != token.STRING {
				t.Errorf("%s: errorf with a status or code that is not a constant", fset.Position(call.Pos()))
				return true
			}
			status, known := httpStatuses[sel.Sel.Name]
			if !known {
				t.Errorf("%s: add http.%s to httpStatuses", fset.Position(call.Pos()), sel.Sel.Name)
				return true
			}
			code, _ := strconv.Unquote(lit.Value)
			codes[fmt.Sprintf("%d %s", status, code)] = true
			return true
		})
	}
	return codes
}

// documentedCodes lists every "status code" pair the document allows: the
// code enum of each error response, at each status it is used for.
func documentedCodes(t *testing.T) map[string]bool {
	t.Helper()
	doc := document(t)
	responses := doc["components"].(map[string]any)["responses"].(map[string]any)
	codes := map[string]bool{}
	for pattern, op := range documentedOperations(t) {
		for status, resp := range op["responses"].(map[string]any) {
			ref, _ := resp.(map[string]any)["$ref"].(string)
			if ref == "" {
				continue
			}
			name := strings.TrimPrefix(ref, "#/components/responses/")
			enum, err := errorCodeEnum(responses[name])
			if err != nil {
				t.Errorf("%s %s: response %s: %v", pattern, status, name, err)
				continue
			}
			for _, code := range enum {
				codes[status+" "+code] = true
			}
		}
	}
	return codes
}

// errorCodeEnum digs the code enum out of an error response component
// (allOf: [Error, {properties: {error: {properties: {code: {enum}}}}}]).
func errorCodeEnum(resp any) ([]string, error) {
	var enum []string
	defer func() { _ = recover() }()
	schema := resp.(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
	for _, part := range schema["allOf"].([]any) {
		props, ok := part.(map[string]any)["properties"].(map[string]any)
		if !ok {
			continue
		}
		code := props["error"].(map[string]any)["properties"].(map[string]any)["code"].(map[string]any)
		for _, c := range code["enum"].([]any) {
			enum = append(enum, c.(string))
		}
	}
	if len(enum) == 0 {
		return nil, fmt.Errorf("no error code enum")
	}
	return enum, nil
}

// Every error code the API answers with is documented at its status, and
// every documented code at a status is one the API answers with there.
func TestDocumentedErrorCodesAreTheCodesTheAPIAnswers(t *testing.T) {
	t.Parallel()
	answered, documented := answeredCodes(t), documentedCodes(t)
	for c := range answered {
		if !documented[c] {
			t.Errorf("the API answers %s; api/openapi.yaml documents it at no route", c)
		}
	}
	for c := range documented {
		if !answered[c] {
			t.Errorf("api/openapi.yaml documents %s; the API never answers it", c)
		}
	}
}

// The vocabulary the document enumerates is the code's.
func TestDocumentedEnumsAreTheLedgersVocabulary(t *testing.T) {
	t.Parallel()
	schemas := document(t)["components"].(map[string]any)["schemas"].(map[string]any)
	enum := func(name string) []string {
		var out []string
		for _, v := range schemas[name].(map[string]any)["enum"].([]any) {
			out = append(out, v.(string))
		}
		return out
	}
	var statuses, reasons []string
	for _, s := range ledger.Statuses {
		statuses = append(statuses, string(s))
	}
	for _, r := range ledger.ReviewReasons {
		reasons = append(reasons, string(r))
	}
	if got := enum("Status"); !slices.Equal(got, statuses) {
		t.Errorf("Status enum %v, ledger.Statuses %v", got, statuses)
	}
	if got := enum("ReviewReason"); !slices.Equal(got, reasons) {
		t.Errorf("ReviewReason enum %v, ledger.ReviewReasons %v", got, reasons)
	}
	var roles []string
	for _, r := range auth.Roles {
		roles = append(roles, string(r))
	}
	for pattern, op := range documentedOperations(t) {
		xr, _ := op["x-roles"].([]any)
		for _, r := range xr {
			if !slices.Contains(roles, fmt.Sprint(r)) {
				t.Errorf("%s: x-roles names %v, not a role", pattern, r)
			}
		}
	}
}

// GET /openapi.json serves openapi.yaml as JSON, without a token.
func TestOpenAPIJSONIsServedAndIsTheYAMLDocument(t *testing.T) {
	t.Parallel()
	store := ledger.New(nil, ledger.Config{})
	tokens, err := auth.New(nil, store, auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := provider.Parse([]byte("providers: {}\nactions: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.New(api.Config{
		Ledger: store, Tokens: tokens,
		Registry: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi.json: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	var served, fromYAML any
	if err := json.Unmarshal(rec.Body.Bytes(), &served); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	raw, err := os.ReadFile("openapi.yaml") // the file the package embeds
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &fromYAML); err != nil {
		t.Fatal(err)
	}
	// yaml.v3 decodes numbers as int and float64, JSON as float64: compare
	// both as JSON.
	b, err := json.Marshal(fromYAML)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &fromYAML); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(served, fromYAML) {
		t.Error("GET /openapi.json is not openapi.yaml")
	}
	if v := served.(map[string]any)["openapi"]; v != "3.1.0" {
		t.Errorf("openapi %v, want 3.1.0", v)
	}
}

// docs/contract.md's route table (route, role, what it does) lists the
// document's operations, each with its route's roles: the contract in
// prose cannot drift from the routes.
func TestContractDocListsEveryRouteWithItsRoles(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "docs", "contract.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(raw), "| route | role | what it does |\n|---|---|---|\n")
	if !ok {
		t.Fatal("docs/contract.md has no route table")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	routePattern := regexp.MustCompile("`((?:GET|POST|PUT|PATCH|DELETE) /[^`?]*)[^`]*`")
	listed := map[string]string{} // pattern → role cell
	for _, row := range strings.Split(table, "\n") {
		cells := strings.Split(row, " | ")
		if len(cells) < 3 {
			t.Fatalf("docs/contract.md: route table row %q", row)
		}
		for _, m := range routePattern.FindAllStringSubmatch(cells[0], -1) {
			listed[m[1]] = cells[1]
		}
	}
	for _, rt := range api.Routes() {
		if rt.Undocumented != "" {
			continue
		}
		cell, ok := listed[rt.Pattern]
		if !ok {
			t.Errorf("docs/contract.md's route table does not list %s", rt.Pattern)
			continue
		}
		var want string
		switch {
		case len(rt.Roles) == 0:
			want = "—"
		case len(rt.Roles) == len(anyRole):
			want = "any"
		default:
			want = string(rt.Roles[0])
		}
		if !strings.HasPrefix(cell, want) {
			t.Errorf("docs/contract.md: %s has role %q, the route lets in %v", rt.Pattern, cell, rt.Roles)
		}
	}
	for pattern, op := range documentedOperations(t) {
		if _, ok := listed[pattern]; !ok && op["x-pending"] != nil {
			t.Errorf("docs/contract.md's route table does not list %s", pattern)
		}
	}
	for pattern := range listed {
		if _, ok := documentedOperations(t)[pattern]; !ok {
			t.Errorf("docs/contract.md lists %s, which is not a route", pattern)
		}
	}
}
