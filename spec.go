// Package pinstore holds what the whole service shares and no package
// owns: the OpenAPI contract of the HTTP API.
package pinstore

import _ "embed"

// OpenAPI is openapi.yaml, the OpenAPI 3.0 description of every route the
// API serves. The api package serves it at /openapi.yaml and renders it at
// /docs; tests prove the router and the spec agree.
//
// It is generated (internal/specgen): each object type's and list's
// paths and schemas from the route table and model's declarations, the
// rest from the hand-written openapi-overlay.yaml. After changing either,
// run go generate . (TestSpecIsGenerated fails until then).
//
//go:generate go run ./internal/specgen/cmd
//go:embed openapi.yaml
var OpenAPI []byte
