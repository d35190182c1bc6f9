package api

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"testing"

	"github.com/pinstore/pinstore/model"
)

// typicalPinBody is a create-pin body as apps send it: a few fields and a
// small data object.
var typicalPinBody = []byte(`{"board_id":"241294561224164665","link":"https://example.com/recipes/lemon-tart","description":"Lemon tart with a brown-butter crust, the one from the bakery on 5th","image_url":"https://cdn.example.com/i/8f/3a/lemon-tart.jpg","data":{"source":"web","tags":["dessert","baking","citrus"],"dominant_color":"#f3d36b","width":736,"height":1104,"rating":4.5,"author":{"name":"Ann","verified":true}}}`)

// BenchmarkDecodeCreatePin is what every create-pin pays to read its
// body: decodeStrict (checkJSON, then encoding/json), beside checkJSON
// alone and encoding/json alone, measured in one run so a busy machine
// skews them alike.
func BenchmarkDecodeCreatePin(b *testing.B) {
	t, _ := model.TypeOf(typePin)
	body := newCreateBody(t).typ // the create's body struct
	b.Run("decodeStrict", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(typicalPinBody)))
		for b.Loop() {
			req := reflect.New(body).Interface()
			if err := decodeStrict(typicalPinBody, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("checkJSON", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(typicalPinBody)))
		fields := jsonFields(reflect.New(body).Interface())
		for b.Loop() {
			if err := checkJSON(typicalPinBody, fields); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json-only", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(typicalPinBody)))
		for b.Loop() {
			req := reflect.New(body).Interface()
			dec := json.NewDecoder(bytes.NewReader(typicalPinBody))
			dec.DisallowUnknownFields()
			if err := dec.Decode(req); err != nil {
				b.Fatal(err)
			}
			if _, err := dec.Token(); err != io.EOF {
				b.Fatal("trailing data")
			}
		}
	})
}
