package specgen

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// The schemas of an object type, from its declaration (model.ObjectType):
// its wire form, its counts and viewer state, the bodies of its create and
// its patch, and the pages and multi-gets of it. Each field is described
// by its kind (model.Kind), with the shared schemas of openapi-overlay.yaml.

// envelopeFirst and envelopeLast are the members of every object's wire
// form around its document's (api/payload.go writes them so).
var (
	envelopeFirst = []string{"id", "type"}
	envelopeLast  = []string{"created_at", "updated_at", "version"}
)

// schema is the wire form of an object of typ.
func (g *gen) schema(typ idcodec.Type) *yaml.Node {
	T := title(typ.String())
	return g.use("schemas", T, func() *yaml.Node {
		d := mustType(typ)
		required := slices.Clone(envelopeFirst)
		props := obj("id", ref("schemas", "ID"), "type", obj("type", str("string"), "enum", flow(typ.String())))
		for _, f := range d.Wire {
			required = append(required, f.Name)
			set(props, f.Name, g.wireField(f))
		}
		required = append(required, envelopeLast...)
		set(props, "created_at", ref("schemas", "Timestamp"))
		set(props, "updated_at", ref("schemas", "Timestamp"))
		set(props, "version", ref("schemas", "Version"))
		if len(d.Counted) > 0 {
			required = append(required, "counts")
			set(props, "counts", g.counts(typ))
		}
		if m, ok := model.ViewerEdgeOf(typ); ok {
			set(props, "viewer", g.viewer(typ, m))
		}
		return obj("type", str("object"), "required", flow(required...), "properties", props)
	})
}

// wireField describes a member of the wire form: a nullable id when the
// document may lack it (its default is null).
func (g *gen) wireField(f model.WireField) *yaml.Node {
	switch f.Kind {
	case model.KindID:
		if f.Default == "null" {
			return g.nullableID()
		}
		return ref("schemas", "ID")
	case model.KindData:
		return ref("schemas", "Data")
	case model.KindFlag:
		return obj("type", str("boolean"))
	}
	return obj("type", str("string"))
}

// nullableID is an ID or null: OpenAPI 3.0 has no null beside a $ref, so
// the ID's pattern is written out.
func (g *gen) nullableID() *yaml.Node {
	return obj("type", str("string"), "nullable", boolean(true), "pattern", quoted(g.idPattern))
}

// counts are the lengths of typ's lists, by their count names.
func (g *gen) counts(typ idcodec.Type) *yaml.Node {
	return g.use("schemas", title(typ.String())+"Counts", func() *yaml.Node {
		var names []string
		props := obj()
		for _, m := range model.Counted(typ) {
			names = append(names, m.CountName())
			set(props, m.CountName(), ref("schemas", "Count"))
		}
		return obj("type", str("object"), "required", flow(names...), "properties", props)
	})
}

// viewer is a viewer's state about an object of typ: its row on the list
// m (model.Mapping.ViewerEdge).
func (g *gen) viewer(typ idcodec.Type, m model.Mapping) *yaml.Node {
	return g.use("schemas", title(typ.String())+"Viewer", func() *yaml.Node {
		return obj("type", str("object"),
			"description", str(fmt.Sprintf("The `viewer`'s state about this %s; only when the request named a `viewer`.", typ)),
			"required", flow(m.ViewerEdge()),
			"properties", obj(m.ViewerEdge(), obj("type", str("boolean"),
				"description", str(fmt.Sprintf("The viewer %ss this %s.", m.Verb(), typ)))))
	})
}

// createSchema is the body of a create of typ: the ids it names that its
// path does not (model.Given), then its editable members; required are
// the ids not Optional and the members with no default.
func (g *gen) createSchema(typ idcodec.Type) *yaml.Node {
	return g.use("schemas", "Create"+title(typ.String()), func() *yaml.Node {
		d := mustType(typ)
		var required []string
		props := obj()
		for _, gv := range d.Given {
			switch {
			case gv.InPath:
			case gv.Optional:
				set(props, gv.Name, g.nullableID())
			default:
				required = append(required, gv.Name)
				set(props, gv.Name, ref("schemas", "ID"))
			}
		}
		for _, f := range editable(d) {
			if f.Default == "" {
				required = append(required, f.Name)
			}
			set(props, f.Name, createField(f))
		}
		return obj("type", str("object"), "additionalProperties", boolean(false),
			"required", flowOrNil(required), "properties", props)
	})
}

// editable are the wire fields of d a create and a patch set, in the
// order of d.Editable.
func editable(d *model.ObjectType) []model.WireField {
	var out []model.WireField
	for _, name := range d.Editable {
		i := slices.IndexFunc(d.Wire, func(f model.WireField) bool { return f.Name == name })
		out = append(out, d.Wire[i])
	}
	return out
}

func flowOrNil(s []string) *yaml.Node {
	if len(s) == 0 {
		return nil
	}
	return flow(s...)
}

// createField describes an editable member in a create's body, by its
// kind, and by whether it has a default (then it may be empty).
func createField(f model.WireField) *yaml.Node {
	optional := f.Default != ""
	switch f.Kind {
	case model.KindUsername:
		return ref("schemas", "Username")
	case model.KindName:
		if optional {
			return ref("schemas", "OptionalName")
		}
		return ref("schemas", "Name")
	case model.KindText:
		if optional {
			return ref("schemas", "OptionalText")
		}
		return ref("schemas", "Text")
	case model.KindURL:
		return ref("schemas", "URL")
	case model.KindData:
		return ref("schemas", "Data")
	case model.KindFlag:
		return obj("type", str("boolean"))
	}
	return ref("schemas", "ID")
}

// patchSchema is the body of a patch of typ: its editable members, each
// nullable (null removes it) unless it has no default.
func (g *gen) patchSchema(typ idcodec.Type) *yaml.Node {
	return g.use("schemas", title(typ.String())+"Patch", func() *yaml.Node {
		d := mustType(typ)
		props := obj()
		for _, f := range editable(d) {
			set(props, f.Name, patchField(f))
		}
		var ro []string
		for _, name := range model.ReadOnlyFields(typ) {
			ro = append(ro, "`"+name+"`")
		}
		return obj("type", str("object"), "additionalProperties", boolean(false),
			"description", str("Read-only fields ("+strings.Join(ro, ", ")+") are refused with `400`."),
			"properties", props)
	})
}

// patchField describes an editable member in a patch.
func patchField(f model.WireField) *yaml.Node {
	switch {
	case f.Kind == model.KindData:
		return ref("schemas", "PatchData")
	case f.Kind == model.KindFlag:
		return obj("type", str("boolean"), "nullable", boolean(true))
	case f.Default == "":
		return createField(f)
	case f.Kind.MaxLen() > 0:
		return obj("type", str("string"), "nullable", boolean(true), "maxLength", num(f.Kind.MaxLen()))
	}
	return createField(f)
}

// listSchema is a page of a list of typ's objects.
func (g *gen) listSchema(typ idcodec.Type) *yaml.Node {
	return g.use("schemas", title(typ.String())+"List", func() *yaml.Node {
		return obj("type", str("object"), "required", flow("items", "count"),
			"properties", obj("items", obj("type", str("array"), "items", g.schema(typ)),
				"next_cursor", ref("schemas", "NextCursor"),
				"count", ref("schemas", "Count")))
	})
}

// manySchema is the answer of a multi-get of typ's objects.
func (g *gen) manySchema(typ idcodec.Type) *yaml.Node {
	return g.use("schemas", title(typ.String())+"Many", func() *yaml.Node {
		return obj("type", str("object"), "required", flow("items", "not_found"),
			"properties", obj("items", obj("type", str("array"), "items", g.schema(typ)),
				"not_found", ref("schemas", "NotFoundIDs")))
	})
}
