package api

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// A create's request follows from its type's declaration
// (model.ObjectType): the ids it is given (Given), from the route's path
// or from the body, as decimal strings, and its Editable members from the
// body. There is no request struct or handler per type: createBody makes
// the body's struct once per type, so that a create's body is decoded as
// strictly as any other body (decodeStrict) and its errors name its
// members.

// createBody is the body of a create of one type.
type createBody struct {
	typ    reflect.Type // the body's struct: a *string per body id, then each Editable member
	ids    []int        // the index in t.Given of each body id, in typ's order
	given  []int        // the index in the document's struct of each of t.Given
	fields []int        // the index in the document's struct of each Editable member, in typ's order
}

func newCreateBody(t *model.ObjectType) createBody {
	doc := reflect.TypeOf(t.New()).Elem()
	var b createBody
	var fields []reflect.StructField
	add := func(name string, typ reflect.Type) {
		fields = append(fields, reflect.StructField{
			Name: "F" + strconv.Itoa(len(fields)), Type: typ, Tag: reflect.StructTag(`json:"` + name + `"`)})
	}
	for i, g := range t.Given {
		b.given = append(b.given, docField(doc, g.Name))
		if !g.InPath {
			b.ids = append(b.ids, i)
			add(g.Name, reflect.TypeFor[*string]())
		}
	}
	for _, name := range t.Editable {
		i := docField(doc, name)
		b.fields = append(b.fields, i)
		add(name, doc.Field(i).Type)
	}
	b.typ = reflect.StructOf(fields)
	return b
}

// docField is the index of the member name in the document struct doc.
func docField(doc reflect.Type, name string) int {
	for i := range doc.NumField() {
		if n, _, _ := strings.Cut(doc.Field(i).Tag.Get("json"), ","); n == name {
			return i
		}
	}
	panic("model: " + doc.String() + " has no member " + name)
}

// create: POST of a new object of typ (POST /v1/boards, POST /v1/pins,
// POST /v1/pins/{id}/comments, …). Its ids are checked in their declared
// order, those in the path before the body is read; a user token naming
// another user than its own where Self is declared is refused (403). The
// store validates the document before any I/O, the one validation a new
// document gets, and creates it under its parent (Creator.Create).
func (s *Server) create(typ idcodec.Type) handlerFunc {
	t, _ := model.TypeOf(typ)
	body := newCreateBody(t)
	return func(w http.ResponseWriter, r *http.Request) error {
		doc := t.New()
		dv := reflect.ValueOf(doc).Elem()
		for i, g := range t.Given {
			if g.InPath {
				id, err := pathID(r, "id", g.Type)
				if err != nil {
					return err
				}
				dv.Field(body.given[i]).SetUint(id)
			}
		}
		req := reflect.New(body.typ)
		if err := decodeBody(w, r, s.maxBody, req.Interface()); err != nil {
			return err
		}
		rv := req.Elem()
		for j, i := range body.ids {
			g := t.Given[i]
			str := rv.Field(j).Interface().(*string)
			if str == nil && g.Optional {
				continue
			}
			if str == nil {
				str = new(string)
			}
			id, err := requiredID(g.Name, *str, g.Type)
			if err != nil {
				return err
			}
			if g.Self != "" {
				if err := actAs(r.Context(), id, g.Self); err != nil {
					return err
				}
			}
			dv.Field(body.given[i]).SetUint(id)
		}
		for j, i := range body.fields {
			v := rv.Field(len(body.ids) + j)
			if data, ok := v.Interface().(json.RawMessage); ok {
				v = reflect.ValueOf(storedData(data))
			}
			dv.Field(i).Set(v)
		}
		doc.SetActive(true)
		o, err := s.creates.Create(r.Context(), typ, doc, actor(r.Context()))
		if err != nil {
			return err
		}
		return writeObject(w, http.StatusCreated, o)
	}
}
