package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"

	"github.com/pinstore/pinstore/idcodec"
)

// Patching follows JSON Merge Patch (RFC 7396): a patch is a JSON object
// whose members replace the target's members, null removes a member, and
// objects merge recursively (so a patch of "data" merges into the client's
// data object).
//
// Only the editable fields of a document may appear in a patch. The
// read-only fields are every other member of the type's wire form (its
// declaration's Wire: the ids that place it, such as owner_id, board_id,
// pin_id and author_id) and the members every object carries (envelope:
// its identity, version, timestamps and counts). Any field the wire form
// does not have is unknown. Both are refused with EInvalid, so a patch can
// never move an object, change its owner, or touch "active".

// envelope are the members of every object's wire form beside its
// document's.
var envelope = []string{"id", "type", "version", "created_at", "updated_at", "counts", "viewer"}

// EditableFields returns the fields a patch of an object of type t may set,
// or nil for an unknown type.
func EditableFields(t idcodec.Type) []string {
	if d, ok := TypeOf(t); ok {
		return slices.Clone(d.Editable)
	}
	return nil
}

// ReadOnlyFields returns the members of an object of type t's wire form
// that no patch may set, or nil for an unknown type.
func ReadOnlyFields(t idcodec.Type) []string {
	d, ok := TypeOf(t)
	if !ok {
		return nil
	}
	out := slices.Clone(envelope)
	for _, f := range d.Wire {
		if !slices.Contains(d.Editable, f.Name) {
			out = append(out, f.Name)
		}
	}
	return out
}

// CheckPatch checks that patch is a JSON object naming only fields that an
// object of type t lets a client edit. It returns an EInvalid *Error that
// names the first offending member.
func CheckPatch(t idcodec.Type, patch []byte) error {
	members, err := objectMembers(patch)
	if err != nil {
		return err
	}
	d, ok := TypeOf(t)
	if !ok {
		return Errorf(EInvalid, "objects of type %s cannot be patched", t)
	}
	for _, name := range members {
		switch {
		case slices.Contains(d.Editable, name):
		case slices.Contains(ReadOnlyFields(t), name):
			return Errorf(EInvalid, "%s is read-only", name)
		default:
			return Errorf(EInvalid, "unknown field %q", name)
		}
	}
	return nil
}

// objectMembers returns the member names of a JSON object, in order.
func objectMembers(b []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, Errorf(EInvalid, "a merge patch must be a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, Errorf(EInvalid, "a merge patch must be a single JSON object")
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names, nil
}

// MergePatch applies an RFC 7396 merge patch to the JSON document target and
// returns the result. Numbers keep their exact text. A patch that is not a
// JSON value, or a target that is not one, is an EInvalid *Error.
func MergePatch(target, patch []byte) ([]byte, error) {
	p, err := decodeValue(patch)
	if err != nil {
		return nil, Errorf(EInvalid, "the patch is not valid JSON")
	}
	var t any
	if len(bytes.TrimSpace(target)) > 0 {
		if t, err = decodeValue(target); err != nil {
			return nil, Errorf(EInvalid, "the patched document is not valid JSON")
		}
	}
	out, err := json.Marshal(mergeValue(t, p))
	if err != nil {
		return nil, Wrap("model.MergePatch", EInternal, "", err)
	}
	return out, nil
}

func decodeValue(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

// mergeValue is RFC 7396's MergePatch(Target, Patch) function.
func mergeValue(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergeValue(t[k], v)
	}
	return t
}

// PatchDoc applies a client's merge patch to the stored document doc of an
// object of type t: it checks the patch's fields (CheckPatch), merges, and
// decodes the result strictly into the type's document, which must validate
// under l and still be active. It returns the re-encoded document, or an
// EInvalid, ETooLarge or ENotFound (the stored document is deleted) *Error.
func PatchDoc(t idcodec.Type, doc, patch []byte, l Limits) ([]byte, error) {
	if err := CheckPatch(t, patch); err != nil {
		return nil, err
	}
	merged, err := MergePatch(doc, patch)
	if err != nil {
		return nil, err
	}
	v := NewDoc(t)
	if v == nil {
		return nil, Errorf(EInvalid, "objects of type %s cannot be patched", t)
	}
	if err := strictDecode(merged, v); err != nil {
		return nil, err
	}
	if !v.IsActive() {
		return nil, Errorf(ENotFound, "%s not found", t)
	}
	if err := v.Validate(l); err != nil {
		return nil, err
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, Wrap("model.PatchDoc", EInternal, "", err)
	}
	return out, nil
}

// strictDecode decodes b into v, refusing unknown fields, and turns a JSON
// type error into an EInvalid *Error that names the field.
func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var me *Error
		switch {
		case errors.As(err, &me):
			return me
		case errors.As(err, &te) && te.Field != "":
			return Errorf(EInvalid, "%s must be a %s", te.Field, jsonKind(te.Type.Kind().String()))
		default:
			return Errorf(EInvalid, "the patched document is invalid")
		}
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "slice":
		return "JSON value"
	default:
		return goKind
	}
}
