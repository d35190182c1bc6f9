package api

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// The /docs page: the OpenAPI document rendered once, at start-up, into a
// self-contained HTML page (inline CSS, no script, nothing fetched), since
// clients may have no internet to load a JavaScript viewer from.

type docPage struct {
	Title, Version string
	Description    []string // paragraphs
	Operations     []docOperation
	Schemas        []docSchema
}

type docOperation struct {
	Anchor, Method, Path, Summary, ID string
	Description                       []string
	Tags                              []string
	Parameters                        []docParam
	Body                              *docBody
	Responses                         []docResponse
}

type docParam struct {
	Name, In, Type, Description string
	Required                    bool
}

type docBody struct {
	Required    bool
	Description string
	Content     []docContent
}

type docContent struct {
	MediaType string
	Schema    docType
}

type docResponse struct {
	Status, Description string
	Headers             []docParam
	Content             []docContent
}

type docType struct {
	Text   string // "string", "array of ", "object"
	Link   string // the schema name linked to, if any
	Suffix string // constraints
}

type docSchema struct {
	Name, Anchor string
	Type         docType
	Description  []string
	Properties   []docParam
	PropTypes    []docType
	Notes        []string
}

var methodOrder = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE"}

// renderDocs loads the spec and renders the /docs page.
func renderDocs(spec []byte) ([]byte, error) {
	doc, err := openapi3.NewLoader().LoadFromData(spec)
	if err != nil {
		return nil, fmt.Errorf("api: load openapi spec: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("api: invalid openapi spec: %w", err)
	}
	page := docPage{Title: doc.Info.Title, Version: doc.Info.Version, Description: paragraphs(doc.Info.Description)}
	paths := doc.Paths.Keys()
	sort.Strings(paths)
	for _, path := range paths {
		item := doc.Paths.Value(path)
		ops := item.Operations()
		for _, method := range methodOrder {
			op, ok := ops[method]
			if !ok {
				continue
			}
			page.Operations = append(page.Operations, docOp(method, path, item, op))
		}
	}
	if doc.Components != nil {
		names := make([]string, 0, len(doc.Components.Schemas))
		for name := range doc.Components.Schemas {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			page.Schemas = append(page.Schemas, docSchemaOf(name, doc.Components.Schemas[name]))
		}
	}
	var buf bytes.Buffer
	if err := docsTemplate.Execute(&buf, page); err != nil {
		return nil, fmt.Errorf("api: render docs: %w", err)
	}
	return buf.Bytes(), nil
}

func docOp(method, path string, item *openapi3.PathItem, op *openapi3.Operation) docOperation {
	d := docOperation{
		Anchor:      "op-" + op.OperationID,
		Method:      method,
		Path:        path,
		Summary:     op.Summary,
		ID:          op.OperationID,
		Description: paragraphs(op.Description),
		Tags:        op.Tags,
	}
	if d.Anchor == "op-" {
		d.Anchor = "op-" + strings.ToLower(method) + strings.NewReplacer("/", "-", "{", "", "}", "").Replace(path)
	}
	// Path-level parameters apply unless the operation overrides them.
	params := openapi3.Parameters{}
	seen := map[string]bool{}
	for _, ps := range []openapi3.Parameters{op.Parameters, item.Parameters} {
		for _, p := range ps {
			if p.Value == nil || seen[p.Value.In+":"+p.Value.Name] {
				continue
			}
			seen[p.Value.In+":"+p.Value.Name] = true
			params = append(params, p)
		}
	}
	inOrder := map[string]int{"path": 0, "query": 1, "header": 2, "cookie": 3}
	slices.SortStableFunc(params, func(a, b *openapi3.ParameterRef) int { return inOrder[a.Value.In] - inOrder[b.Value.In] })
	for _, p := range params {
		v := p.Value
		d.Parameters = append(d.Parameters, docParam{
			Name: v.Name, In: v.In, Required: v.Required,
			Type: typeOf(v.Schema).String(), Description: v.Description,
		})
	}
	if op.RequestBody != nil && op.RequestBody.Value != nil {
		rb := op.RequestBody.Value
		d.Body = &docBody{Required: rb.Required, Description: rb.Description, Content: contents(rb.Content)}
	}
	if op.Responses != nil {
		codes := op.Responses.Keys()
		sort.Strings(codes)
		for _, code := range codes {
			r := op.Responses.Value(code)
			if r == nil || r.Value == nil {
				continue
			}
			resp := docResponse{Status: code, Content: contents(r.Value.Content)}
			if r.Value.Description != nil {
				resp.Description = *r.Value.Description
			}
			hnames := make([]string, 0, len(r.Value.Headers))
			for name := range r.Value.Headers {
				hnames = append(hnames, name)
			}
			sort.Strings(hnames)
			for _, name := range hnames {
				h := r.Value.Headers[name]
				if h.Value == nil {
					continue
				}
				resp.Headers = append(resp.Headers, docParam{Name: name, Required: h.Value.Required, Description: h.Value.Description, Type: typeOf(h.Value.Schema).String()})
			}
			d.Responses = append(d.Responses, resp)
		}
	}
	return d
}

func contents(c openapi3.Content) []docContent {
	types := make([]string, 0, len(c))
	for mt := range c {
		types = append(types, mt)
	}
	sort.Strings(types)
	out := make([]docContent, 0, len(types))
	for _, mt := range types {
		out = append(out, docContent{MediaType: mt, Schema: typeOf(c[mt].Schema)})
	}
	return out
}

// schemaName is the component name a $ref points at, or "".
func schemaName(ref string) string {
	const prefix = "#/components/schemas/"
	if strings.HasPrefix(ref, prefix) {
		return ref[len(prefix):]
	}
	return ""
}

func (t docType) String() string { return t.Text + t.Link + t.Suffix }

// typeOf describes a schema in a few words, linking to a named schema.
func typeOf(s *openapi3.SchemaRef) docType {
	if s == nil {
		return docType{Text: "any"}
	}
	if name := schemaName(s.Ref); name != "" {
		return docType{Link: name}
	}
	v := s.Value
	if v == nil {
		return docType{Text: "any"}
	}
	var t docType
	switch {
	case v.Type != nil && v.Type.Is("array"):
		it := typeOf(v.Items)
		t = docType{Text: "array of " + it.Text, Link: it.Link, Suffix: it.Suffix}
	case v.Type != nil && len(v.Type.Slice()) > 0:
		t.Text = strings.Join(v.Type.Slice(), " or ")
	case len(v.OneOf) > 0:
		t.Text = "one of several shapes"
	default:
		t.Text = "any"
	}
	t.Suffix += constraints(v)
	return t
}

// constraints lists a schema's bounds in words.
func constraints(v *openapi3.Schema) string {
	var c []string
	if v.Format != "" {
		c = append(c, v.Format)
	}
	if v.Nullable {
		c = append(c, "nullable")
	}
	if len(v.Enum) > 0 {
		vals := make([]string, len(v.Enum))
		for i, e := range v.Enum {
			vals[i] = fmt.Sprint(e)
		}
		c = append(c, "one of "+strings.Join(vals, ", "))
	}
	if v.Min != nil {
		c = append(c, "≥ "+strconv.FormatFloat(*v.Min, 'f', -1, 64))
	}
	if v.Max != nil {
		c = append(c, "≤ "+strconv.FormatFloat(*v.Max, 'f', -1, 64))
	}
	if v.MinLength > 0 {
		c = append(c, "min length "+strconv.FormatUint(v.MinLength, 10))
	}
	if v.MaxLength != nil {
		c = append(c, "max length "+strconv.FormatUint(*v.MaxLength, 10))
	}
	if v.MinItems > 0 {
		c = append(c, "min items "+strconv.FormatUint(v.MinItems, 10))
	}
	if v.MaxItems != nil {
		c = append(c, "max items "+strconv.FormatUint(*v.MaxItems, 10))
	}
	if v.Pattern != "" {
		c = append(c, "pattern "+v.Pattern)
	}
	if v.Default != nil {
		c = append(c, "default "+fmt.Sprint(v.Default))
	}
	if len(c) == 0 {
		return ""
	}
	return " (" + strings.Join(c, "; ") + ")"
}

func docSchemaOf(name string, s *openapi3.SchemaRef) docSchema {
	d := docSchema{Name: name, Anchor: "schema-" + name}
	v := s.Value
	if v == nil {
		return d
	}
	d.Description = paragraphs(v.Description)
	d.Type = typeOf(&openapi3.SchemaRef{Value: v})
	props := make([]string, 0, len(v.Properties))
	for p := range v.Properties {
		props = append(props, p)
	}
	sort.Strings(props)
	for _, p := range props {
		pt := typeOf(v.Properties[p])
		desc := ""
		if pv := v.Properties[p].Value; pv != nil && v.Properties[p].Ref == "" {
			desc = pv.Description
		}
		d.Properties = append(d.Properties, docParam{Name: p, Required: slices.Contains(v.Required, p), Description: desc})
		d.PropTypes = append(d.PropTypes, pt)
	}
	if ap := v.AdditionalProperties; ap.Has != nil && !*ap.Has {
		d.Notes = append(d.Notes, "No other fields are allowed.")
	} else if ap.Schema != nil {
		d.Notes = append(d.Notes, "Other fields: "+typeOf(ap.Schema).String()+".")
	}
	for _, alt := range v.OneOf {
		if alt.Value != nil && len(alt.Value.Required) > 0 {
			d.Notes = append(d.Notes, "One shape requires: "+strings.Join(alt.Value.Required, ", ")+".")
		}
	}
	return d
}

// paragraphs splits a description at blank lines.
func paragraphs(s string) []string {
	var out []string
	for _, p := range strings.Split(strings.TrimSpace(s), "\n\n") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

var docsTemplate = template.Must(template.New("docs").Funcs(template.FuncMap{
	"lower": strings.ToLower,
}).Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} {{.Version}}</title>
<style>
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2330;background:#fafbfc}
main{max-width:1100px;margin:0 auto;padding:24px}
h1{margin-top:0}
h2{border-bottom:2px solid #d8dee4;padding-bottom:4px;margin-top:40px}
section.op{background:#fff;border:1px solid #d8dee4;border-radius:6px;padding:12px 16px;margin:16px 0}
section.op h3{margin:0 0 8px;font-size:17px}
.m{display:inline-block;min-width:64px;text-align:center;border-radius:4px;color:#fff;font:bold 13px monospace;padding:2px 6px;margin-right:8px}
.get{background:#2f7d32}.post{background:#1565c0}.put{background:#8e24aa}.patch{background:#ef6c00}.delete{background:#c62828}
code,.path{font-family:ui-monospace,Menlo,Consolas,monospace}
table{border-collapse:collapse;width:100%;margin:6px 0 12px}
th,td{border:1px solid #e1e4e8;padding:4px 8px;text-align:left;vertical-align:top;font-size:14px}
th{background:#f3f5f7}
p{white-space:pre-wrap;margin:6px 0}
ul.toc{columns:2;font-size:14px}
.req{color:#c62828;font-weight:bold}
</style>
</head>
<body><main>
<h1>{{.Title}} <small>{{.Version}}</small></h1>
{{range .Description}}<p>{{.}}</p>
{{end}}
<p>The machine-readable description is at <a href="/openapi.yaml">/openapi.yaml</a>.</p>
<h2>Operations</h2>
<ul class="toc">
{{range .Operations}}<li><a href="#{{.Anchor}}"><code>{{.Method}} {{.Path}}</code></a> {{.Summary}}</li>
{{end}}</ul>
{{range .Operations}}
<section class="op" id="{{.Anchor}}">
<h3><span class="m {{lower .Method}}">{{.Method}}</span><span class="path">{{.Path}}</span></h3>
<p><strong>{{.Summary}}</strong>{{if .ID}} <small>(operationId <code>{{.ID}}</code>)</small>{{end}}</p>
{{range .Description}}<p>{{.}}</p>
{{end}}
{{if .Parameters}}<h4>Parameters</h4>
<table><tr><th>Name</th><th>In</th><th>Type</th><th>Description</th></tr>
{{range .Parameters}}<tr><td><code>{{.Name}}</code>{{if .Required}} <span class="req">required</span>{{end}}</td><td>{{.In}}</td><td><code>{{.Type}}</code></td><td>{{.Description}}</td></tr>
{{end}}</table>{{end}}
{{with .Body}}<h4>Request body{{if .Required}} <span class="req">required</span>{{end}}</h4>
{{if .Description}}<p>{{.Description}}</p>{{end}}
<table><tr><th>Content type</th><th>Schema</th></tr>
{{range .Content}}<tr><td><code>{{.MediaType}}</code></td><td>{{template "type" .Schema}}</td></tr>
{{end}}</table>{{end}}
<h4>Responses</h4>
<table><tr><th>Status</th><th>Description</th><th>Headers</th><th>Body</th></tr>
{{range .Responses}}<tr><td><strong>{{.Status}}</strong></td><td>{{.Description}}</td>
<td>{{range .Headers}}<code>{{.Name}}</code>{{if .Required}} <span class="req">always</span>{{end}}<br>{{end}}</td>
<td>{{range .Content}}<code>{{.MediaType}}</code>: {{template "type" .Schema}}<br>{{end}}</td></tr>
{{end}}</table>
</section>
{{end}}
<h2>Schemas</h2>
{{range .Schemas}}
<section class="op" id="{{.Anchor}}">
<h3><code>{{.Name}}</code>: {{template "type" .Type}}</h3>
{{range .Description}}<p>{{.}}</p>
{{end}}
{{if .Properties}}{{$types := .PropTypes}}<table><tr><th>Field</th><th>Type</th><th>Description</th></tr>
{{range $i, $p := .Properties}}<tr><td><code>{{$p.Name}}</code>{{if $p.Required}} <span class="req">required</span>{{end}}</td><td>{{template "type" (index $types $i)}}</td><td>{{$p.Description}}</td></tr>
{{end}}</table>{{end}}
{{range .Notes}}<p>{{.}}</p>
{{end}}
</section>
{{end}}
</main></body>
</html>
{{define "type"}}<code>{{.Text}}{{if .Link}}<a href="#schema-{{.Link}}">{{.Link}}</a>{{end}}{{.Suffix}}</code>{{end}}
`))
