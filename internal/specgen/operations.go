package specgen

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// title is s with its first letter upper-case: "user" → "User".
func title(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// collectionOf is typ's URL segment: "users".
func collectionOf(typ idcodec.Type) string {
	d, _ := model.TypeOf(typ)
	return d.Collection
}

// pathID is the {id} parameter of an object of typ.
func (g *gen) pathID(typ idcodec.Type) *yaml.Node {
	return g.use("parameters", title(typ.String())+"ID", func() *yaml.Node {
		return obj("name", str("id"), "in", str("path"), "required", boolean(true),
			"description", str(fmt.Sprintf("A %s ID. Another object type's ID is `404`.", typ)),
			"schema", ref("schemas", "ID"))
	})
}

// responses are an operation's responses: first its own (status, then
// the response), then the shared errors of each status given, in order
// (complete adds those of every route: 401, 403, 429 and 500).
func responses(own []any, errs ...int) *yaml.Node {
	n := obj(own...)
	for _, code := range slices.Sorted(slices.Values(errs)) {
		set(n, fmt.Sprint(code), ref("responses", errorResponse[code]))
	}
	for i := 0; i < len(n.Content); i += 2 {
		n.Content[i].Style = yaml.SingleQuotedStyle
	}
	return n
}

// errorResponse is the shared response (openapi-overlay.yaml) of each
// error status an object's or a list's route answers.
var errorResponse = map[int]string{
	400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
	409: "IdempotencyKeyInUse", 412: "VersionMismatch", 413: "TooLarge",
	415: "UnsupportedMediaType", 422: "IdempotencyKeyReused", 429: "RateLimited",
	500: "Internal", 503: "Unavailable",
}

// params are the shared parameters of the names given (complete adds
// the request's own headers).
func params(names ...string) *yaml.Node {
	if len(names) == 0 {
		return nil
	}
	n := seq()
	for _, name := range names {
		n.Content = append(n.Content, ref("parameters", name))
	}
	return n
}

// jsonBody is a required request body of schema, as each media type.
func jsonBody(schema *yaml.Node, media ...string) *yaml.Node {
	content := obj()
	for _, mt := range media {
		set(content, mt, obj("schema", schema))
	}
	return obj("required", boolean(true), "content", content)
}

// operation describes the route o; shared is set when its path holds the
// path's parameters.
func (g *gen) operation(o op, shared bool) *yaml.Node {
	name, d := o.typ.String(), mustType(o.typ)
	T, tag := title(name), d.Collection
	switch o.kind {
	case opCreate:
		errs := []int{400, 409, 413, 415, 422, 503}
		if d.Parent != 0 || len(d.Live) > 0 {
			errs = append(errs, 404) // a parent, or an object named, that is not there
		}
		return obj("tags", flow(tag), "operationId", str("create"+T),
			"summary", str("Create a "+name),
			"parameters", params("IdempotencyKey"),
			"requestBody", jsonBody(g.createSchema(o.typ), "application/json"),
			"responses", responses([]any{"201", g.created(o.typ)}, errs...))
	case opMany:
		return obj("tags", flow(tag), "operationId", str("get"+title(d.Collection)),
			"summary", str(fmt.Sprintf("Get many %s at once", d.Collection)),
			"description", str(fmt.Sprintf("Returns the live %s among `ids`, in request order. IDs that are unknown, deleted or not %s IDs are listed in `not_found`. Duplicates are answered once.", d.Collection, name)),
			"parameters", params("IDs"),
			"responses", responses([]any{"200", obj(
				"description", str(fmt.Sprintf("The %s found, and the IDs not found.", d.Collection)),
				"headers", requestHeaders(),
				"content", obj("application/json", obj("schema", g.manySchema(o.typ))))},
				400, 503))
	case opGet:
		return obj("tags", flow(tag), "operationId", str("get"+T),
			"summary", str("Get a "+name),
			"parameters", params(g.pathIDName(o.typ, shared)...),
			"responses", responses([]any{"200", g.ok(o.typ)}, 400, 404, 503))
	case opPatch:
		return obj("tags", flow(tag), "operationId", str("update"+T),
			"summary", str("Edit a "+name),
			"description", str("A JSON merge patch (RFC 7396) of the editable fields; `null` removes a field, `data` merges recursively. Read-only fields are refused."),
			"parameters", params(append(g.pathIDName(o.typ, shared), "IfMatch")...),
			"requestBody", jsonBody(g.patchSchema(o.typ), "application/merge-patch+json", "application/json"),
			"responses", responses([]any{"200", g.ok(o.typ)}, 400, 404, 412, 413, 415, 503))
	case opDelete:
		return obj("tags", flow(tag), "operationId", str("delete"+T),
			"summary", str("Delete a "+name),
			"description", str(fmt.Sprintf("Soft-deletes the %s; it leaves every list and is no longer returned. Deleting it again answers `404`, as for any object that is not live.", name)),
			"parameters", params(append(g.pathIDName(o.typ, shared), "IfMatch")...),
			"responses", responses([]any{"204", ref("responses", "NoContent")}, 400, 404, 412, 503))
	case opList:
		from := o.list.From()
		if !createdAt(o.list) {
			tag = collectionOf(from)
		}
		names := []string{"Limit", "Cursor", "Offset", "Order"}
		if !byHand(o.list) {
			names = append(names, "Since", "Until")
		}
		if _, ok := model.ViewerEdgeOf(o.typ); ok {
			names = append(names, "Viewer")
		}
		return obj("tags", flow(tag), "operationId", str("list"+title(from.String())+title(o.list.Segment())),
			"summary", str(fmt.Sprintf("List a %s's %s", from, o.list.Segment())),
			"parameters", params(append(g.pathIDName(from, shared), names...)...),
			"responses", responses([]any{"200", g.listOK(o.typ)}, 400, 404, 503))
	}
	panic("specgen: no operation of kind " + fmt.Sprint(o.kind))
}

// pathIDName names the {id} parameter of typ for an operation, unless its
// path holds it (shared).
func (g *gen) pathIDName(typ idcodec.Type, shared bool) []string {
	if shared {
		return nil
	}
	g.pathID(typ)
	return []string{title(typ.String()) + "ID"}
}

func mustType(typ idcodec.Type) *model.ObjectType {
	d, ok := model.TypeOf(typ)
	if !ok {
		panic("specgen: no declaration of " + typ.String())
	}
	return d
}

// requestHeaders are the headers of every response to a request.
func requestHeaders() *yaml.Node {
	return obj("X-Request-Id", ref("headers", "X-Request-Id"),
		"Pinstore-Consistency", ref("headers", "Pinstore-Consistency"))
}

// ok is the response that returns an object of typ.
func (g *gen) ok(typ idcodec.Type) *yaml.Node {
	return g.use("responses", title(typ.String())+"OK", func() *yaml.Node {
		return obj("description", str("The "+typ.String()+"."),
			"headers", obj("ETag", ref("headers", "ETag"),
				"X-Request-Id", ref("headers", "X-Request-Id"),
				"Pinstore-Consistency", ref("headers", "Pinstore-Consistency")),
			"content", obj("application/json", obj("schema", g.schema(typ))))
	})
}

// created is the response of a create of typ.
func (g *gen) created(typ idcodec.Type) *yaml.Node {
	return g.use("responses", title(typ.String())+"Created", func() *yaml.Node {
		return obj("description", str(fmt.Sprintf("The %s was created (or, with `Idempotent-Replayed`, had been created by an earlier request with the same `Idempotency-Key`).", typ)),
			"headers", obj("Idempotent-Replayed", ref("headers", "Idempotent-Replayed"),
				"ETag", ref("headers", "ETag"),
				"Location", g.location(),
				"X-Request-Id", ref("headers", "X-Request-Id"),
				"Pinstore-Consistency", ref("headers", "Pinstore-Consistency")),
			"content", obj("application/json", obj("schema", g.schema(typ))))
	})
}

// location is the Location header of a create: the path of an object of
// any type.
func (g *gen) location() *yaml.Node {
	return g.use("headers", "Location", func() *yaml.Node {
		var cs []string
		for _, typ := range model.ObjectTypes() {
			cs = append(cs, collectionOf(typ))
		}
		return obj("description", str("The path of the created object."),
			"required", boolean(true),
			"schema", obj("type", str("string"),
				"pattern", quoted("^/v1/("+strings.Join(cs, "|")+")/[1-9][0-9]{0,18}$")))
	})
}

// listOK is the response of a page of a list of typ's objects.
func (g *gen) listOK(typ idcodec.Type) *yaml.Node {
	return g.use("responses", title(typ.String())+"ListOK", func() *yaml.Node {
		return obj("description", str("One page of "+collectionOf(typ)+"."),
			"headers", requestHeaders(),
			"content", obj("application/json", obj("schema", g.listSchema(typ))))
	})
}
